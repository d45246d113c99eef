// --use-checkpoint-args: Megatron's load_args_from_checkpoint, over the arguments a checkpoint
// saved (a JSON object keyed by Megatron's dest names, as config_json writes them).
#pragma once

#include <string>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

/// Sets the model (and, with --use-mp-args-from-checkpoint-args, the parallel) arguments from the
/// checkpoint's: those Megatron forces always, the others only where the command line left them
/// unset. Returns the lines Megatron prints ("Setting num_layers to 24 from checkpoint", ...).
/// Throws std::runtime_error when the text is not a JSON object.
std::vector<std::string> apply_checkpoint_args(megatron_args& args, const std::string& checkpoint_args_json);

}  // namespace mactor::config
