// `mactor simulate`'s command line: its own flags apart from the pretrain_gpt (Megatron) flags,
// which go through config/'s parser and validation exactly as pretrain_gpt's do.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/resolve.hpp"

namespace mactor::tools::simulate_cli {

/// A user error: messages for stderr, exit status 2.
struct usage_error {
  std::vector<std::string> messages;
};

struct simulate_flags {
  std::optional<std::string> system;     ///< --system FILE
  std::optional<std::string> timeline;   ///< --timeline FILE (trace-event JSON)
  std::optional<int> world_size, data_parallel_size;
  bool help = false;
  std::vector<std::string> megatron;     ///< everything else
};

/// Splits argv (argv[0] = "simulate"). Throws usage_error.
simulate_flags split_flags(int argc, char** argv);

/// The Megatron flags through config::resolve with world size from --world-size or
/// --data-parallel-size; --train-iters and --lr (which a simulation does not read) get defaults
/// when absent.
config::resolution resolved(const simulate_flags& f, const char* prog);

}  // namespace mactor::tools::simulate_cli
