// `mactor inspect ADDR`: attaches to a running job's inspector and prints a live text view of
// its actors, the last iteration's per-rank timeline and any stalls.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "inspector/client.hpp"
#include "inspector/text_view.hpp"
#include "tools/inspect/token_option.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

constexpr const char* usage =
    "usage: mactor inspect ADDR [--token TOKEN | --token-file FILE] [--once] [--interval SECONDS]\n"
    "                      [--width COLUMNS]\n"
    "  ADDR is the HOST:PORT the job printed at start; the token is the one it printed (or its\n"
    "  token file, or $MACTOR_INSPECTOR_TOKEN). --once prints one frame and exits; otherwise the\n"
    "  view refreshes every --interval seconds (default 1) until interrupted.\n";

struct inspect_options {
  std::string address;
  token_option token;
  bool once = false;
  double interval_s = 1.0;
  int width = 0;
};

double parse_positive(const std::string& name, const std::string& text) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw usage_error("argument " + name + ": invalid value '" + text + "' (a number greater than 0)");
}

inspect_options parse(int argc, char** argv) {
  inspect_options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (o.token.parse(argc, argv, i)) continue;
    if (arg == "--once") {
      o.once = true;
    } else if (auto v = option_value(argc, argv, i, "--interval")) {
      o.interval_s = parse_positive("--interval", *v);
    } else if (auto v = option_value(argc, argv, i, "--width")) {
      o.width = static_cast<int>(parse_positive("--width", *v));
    } else if (!arg.empty() && arg[0] == '-') {
      throw usage_error("unrecognized argument: " + arg);
    } else if (o.address.empty()) {
      o.address = arg;
    } else {
      throw usage_error("unrecognized argument: " + arg + " (only one ADDR)");
    }
  }
  if (o.address.empty()) throw usage_error("the following arguments are required: ADDR");
  return o;
}

int terminal_width() {
  winsize ws{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
    return ws.ws_col;
  return 120;
}

}  // namespace

int inspect_main(int argc, char** argv) {
  inspect_options o;
  std::string token;
  try {
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
        std::fputs(usage, stdout);
        return 0;
      }
    o = parse(argc, argv);
    token = o.token.resolve();
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%smactor inspect: error: %s\n", usage, e.what());
    return 2;
  }
  try {
    const inspector::client client(o.address, token);
    const bool live = !o.once;
    const bool clear = live && ::isatty(STDOUT_FILENO);
    while (true) {
      std::string frame = inspector::render_text(client.snapshot(), o.width > 0 ? o.width : terminal_width());
      std::fputs(clear ? ("\x1b[H\x1b[2J" + frame).c_str() : frame.c_str(), stdout);
      std::fflush(stdout);
      if (!live) return 0;
      if (!clear) std::fputs("\n", stdout);
      std::this_thread::sleep_for(std::chrono::duration<double>(o.interval_s));
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "mactor inspect: error: %s\n", e.what());
    return 2;
  } catch (const inspector::client_error& e) {
    std::fprintf(stderr, "mactor inspect: error: %s\n", e.what());
    return e.why == inspector::client_error::reason::forbidden ? 2 : 1;
  }
}

}  // namespace mactor::tools
