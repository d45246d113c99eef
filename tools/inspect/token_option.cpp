// Parsing of the shared token options (see token_option.hpp).
#include "tools/inspect/token_option.hpp"

#include <cstdlib>

#include "inspector/access_token.hpp"

namespace mactor::tools {

std::optional<std::string> option_value(int argc, char** argv, int& i, const std::string& name) {
  std::string arg = argv[i];
  if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  if (arg != name) return std::nullopt;
  if (i + 1 >= argc) throw usage_error("argument " + name + ": expected one argument");
  return std::string(argv[++i]);
}

bool token_option::parse(int argc, char** argv, int& i) {
  if (auto v = option_value(argc, argv, i, "--token")) {
    token = *v;
    return true;
  }
  if (auto v = option_value(argc, argv, i, "--token-file")) {
    token_file = *v;
    return true;
  }
  return false;
}

std::string token_option::resolve() const {
  if (token && token_file)
    throw usage_error("argument --token: not allowed with argument --token-file; give one of them");
  if (token) {
    if (token->empty()) throw usage_error("argument --token: the token is empty");
    return *token;
  }
  if (token_file) {
    try {
      return inspector::read_token_file(*token_file);
    } catch (const std::exception& e) {
      throw usage_error(std::string("argument --token-file: ") + e.what());
    }
  }
  if (const char* env = std::getenv("MACTOR_INSPECTOR_TOKEN"); env && *env) return env;
  throw usage_error("no inspector token: pass --token-file FILE (the token file the job wrote), "
                    "--token TOKEN (the token the job printed at start), or set MACTOR_INSPECTOR_TOKEN");
}

}  // namespace mactor::tools
