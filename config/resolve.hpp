// From a command line to the one validated config message: parse, support check, validation, derived values.
#pragma once

#include <functional>
#include <optional>

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/flag_status.hpp"
#include "config/megatron_args.hpp"
#include "config/validate.hpp"

namespace mactor::config {

/// What a program does with its command line: either exit now (help, --flag-status, --dump-config,
/// or errors) with the given status and texts, or go on with `args`.
struct resolution {
  std::optional<int> exit_status;  // set when the program should exit
  std::string out;                 // for stdout (help, table, JSON)
  std::string err;                 // for stderr (errors, warnings, notices)
  megatron_args args;              // the validated config when exit_status is empty
};

/// Runs the whole front end of pretrain_gpt. Error texts follow argparse: "PROG: error: ...";
/// every violation is listed. Warnings (Megatron's and accepted-without-effect flags) go to `err`.
/// Only the flags in `scope` are held to mactor's support table (config/flag_status.hpp).
/// --use-checkpoint-args: the arguments saved in --load's latest checkpoint (a JSON object), or
/// nullopt when the directory holds no checkpoint. Throws std::exception naming what is wrong.
using checkpoint_args_reader = std::function<std::optional<std::string>(const std::string& load_dir)>;

resolution resolve(std::span<const std::string> arguments, std::string_view prog, const process_placement& placement,
                   const support_scope& scope = every_flag, const checkpoint_args_reader& checkpoint_args = {});

}  // namespace mactor::config
