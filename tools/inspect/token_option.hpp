// The token options `mactor inspect` and `mactor swap` share: --token, --token-file, or the
// MACTOR_INSPECTOR_TOKEN environment variable.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace mactor::tools {

/// A command-line mistake; the subcommand prints it argparse-style and exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct token_option {
  std::optional<std::string> token;       ///< --token T
  std::optional<std::string> token_file;  ///< --token-file F

  /// Consumes argv[i] (and its value) if it is one of the token options; returns false if not.
  bool parse(int argc, char** argv, int& i);
  /// The token to send: --token, else the file's, else $MACTOR_INSPECTOR_TOKEN. Throws
  /// usage_error when none is given, both flags are given, or the file cannot be read.
  std::string resolve() const;
};

/// The value of option argv[i] ("--name VALUE" or "--name=VALUE"), advancing i past it; nullopt
/// when argv[i] is not that option. Throws usage_error when the value is missing.
std::optional<std::string> option_value(int argc, char** argv, int& i, const std::string& name);

}  // namespace mactor::tools
