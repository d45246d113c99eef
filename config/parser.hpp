// Megatron's command line, parsed with argparse's semantics (allow_abbrev=False) into megatron_args.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

/// A command line that argparse would reject. what() is the whole stderr text
/// ("usage: ...\nPROG: error: ..."); the program prints it and exits with status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// mactor's own flags, which Megatron does not have.
struct program_flags {
  bool help = false;         // -h / --help
  bool dump_config = false;  // --dump-config: print the resolved config as JSON and exit
  bool flag_status = false;  // --flag-status: print every flag's support status and exit
};

struct parsed_command_line {
  megatron_args args;               // Megatron's defaults, overwritten by the flags given
  std::vector<std::string> given;   // dests set on the command line, in order of appearance
  program_flags program;
};

/// Parses `arguments` (without the program name) exactly as Megatron's argparse parser would.
/// Throws usage_error for unknown flags (all listed), bad values, bad choices and missing values.
parsed_command_line parse_command_line(std::span<const std::string> arguments, std::string_view prog);

/// The `usage:` line printed above every error.
std::string usage_line(std::string_view prog);
/// The --help text: usage, then one section per Megatron argument group, in Megatron's order.
std::string help_text(std::string_view prog);

}  // namespace mactor::config
