// Splitting and resolving `mactor simulate`'s command line.
#include "tools/simulate/simulate_options.hpp"

#include <algorithm>

#include "config/parser.hpp"
#include "config/validate.hpp"

namespace mactor::tools::simulate_cli {
namespace {

[[noreturn]] void fail(std::string message) { throw usage_error{{std::move(message)}}; }

int positive(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(value, &used);
    if (used == value.size() && v >= 1) return v;
  } catch (const std::exception&) {
  }
  fail("argument " + flag + ": expected a whole number of at least 1, got '" + value + "'");
}

bool given(const config::parsed_command_line& p, const char* dest) {
  return std::find(p.given.begin(), p.given.end(), dest) != p.given.end();
}

}  // namespace

simulate_flags split_flags(int argc, char** argv) {
  simulate_flags f;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    const auto eq = flag.find('=');
    const bool inline_value = flag.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inline_value) value = flag.substr(eq + 1), flag = flag.substr(0, eq);
    auto take = [&] {
      if (inline_value) return value;
      if (i + 1 >= argc) fail("argument " + flag + ": expected one argument");
      return std::string(argv[++i]);
    };
    if (flag == "--system") f.system = take();
    else if (flag == "--timeline") f.timeline = take();
    else if (flag == "--world-size") f.world_size = positive(flag, take());
    else if (flag == "--data-parallel-size") f.data_parallel_size = positive(flag, take());
    else if (flag == "-h" || flag == "--help") f.help = true;
    else f.megatron.push_back(argv[i]);
  }
  if (f.help) return f;
  if (f.world_size && f.data_parallel_size) fail("give --data-parallel-size or --world-size, not both");
  if (!f.system) fail("the machine is unknown: give --system FILE (e.g. simulate/systems/a100_80gb_dgx.json)");
  return f;
}

config::resolution resolved(const simulate_flags& f, const char* prog) {
  const auto parsed = config::parse_command_line(f.megatron, prog);  // throws config::usage_error
  std::vector<std::string> flags = f.megatron;
  if (!given(parsed, "train_iters") && !given(parsed, "train_samples")) flags.insert(flags.end(), {"--train-iters", "1"});
  if (!given(parsed, "lr")) flags.insert(flags.end(), {"--lr", "1e-4"});
  const std::int64_t replica = config::replica_size(parsed.args);
  const std::int64_t world = f.world_size.value_or(f.data_parallel_size.value_or(1) * replica);
  // Held to Megatron's rules, not to mactor's support table: a simulation may plan a layout with
  // flags mactor's engine does not run (the simulator refuses what it cannot model itself).
  return config::resolve(flags, prog, {0, world}, [](std::string_view) { return false; });
}

}  // namespace mactor::tools::simulate_cli
