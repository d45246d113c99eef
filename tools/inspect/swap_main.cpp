// `mactor swap logger|eval ADDR -- FLAGS...`: asks a running job to replace its logger or
// evaluator with one built from FLAGS, and prints the job's answer.
#include <cstdio>
#include <string>
#include <vector>

#include "inspector/client.hpp"
#include "tools/inspect/token_option.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

constexpr const char* usage =
    "usage: mactor swap {logger,eval} ADDR [--token TOKEN | --token-file FILE] -- FLAGS...\n"
    "  Replaces the running job's logger (or evaluator) with one started from FLAGS (Megatron's\n"
    "  logging or evaluation flags, e.g. -- --log-interval 5). ADDR and the token are the ones the\n"
    "  job printed at start. Exit status 0 when the job took the new actor, 1 when it refused.\n";

struct swap_options {
  std::string target, address;
  token_option token;
  std::vector<std::string> flags;
};

swap_options parse(int argc, char** argv) {
  swap_options o;
  if (argc < 2) throw usage_error("the following arguments are required: {logger,eval}, ADDR");
  o.target = argv[1];
  if (o.target != "logger" && o.target != "eval")
    throw usage_error("argument {logger,eval}: invalid choice: '" + o.target +
                      "' (choose from 'logger', 'eval')");
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      o.flags.assign(argv + i + 1, argv + argc);
      break;
    }
    if (o.token.parse(argc, argv, i)) continue;
    if (!arg.empty() && arg[0] == '-')
      throw usage_error("unrecognized argument: " + arg + " (put the " + o.target +
                        "'s flags after --)");
    if (!o.address.empty()) throw usage_error("unrecognized argument: " + arg + " (only one ADDR)");
    o.address = arg;
  }
  if (o.address.empty()) throw usage_error("the following arguments are required: ADDR");
  return o;
}

}  // namespace

int swap_main(int argc, char** argv) {
  swap_options o;
  std::string token;
  try {
    if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
      std::fputs(usage, stdout);
      return 0;
    }
    o = parse(argc, argv);
    token = o.token.resolve();
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%smactor swap: error: %s\n", usage, e.what());
    return 2;
  }
  try {
    const inspector::client client(o.address, token);
    auto answer = client.swap(o.target, o.flags);
    if (answer.ok) {
      std::printf("mactor swap: the job took the new %s: %s\n", o.target.c_str(), answer.message.c_str());
      return 0;
    }
    std::fprintf(stderr, "mactor swap: the job refused the new %s and kept the old one: %s\n",
                 o.target.c_str(), answer.message.c_str());
    return 1;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "mactor swap: error: %s\n", e.what());
    return 2;
  } catch (const inspector::client_error& e) {
    std::fprintf(stderr, "mactor swap: error: %s\n", e.what());
    return e.why == inspector::client_error::reason::forbidden ? 2 : 1;
  }
}

}  // namespace mactor::tools
