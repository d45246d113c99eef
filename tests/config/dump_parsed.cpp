// Test helper: parses Megatron flags without validation and prints the parsed values as JSON.
#include <cstdio>
#include <string>
#include <vector>

#include "config/config_json.hpp"
#include "config/parser.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  try {
    auto parsed = mactor::config::parse_command_line(arguments, "config_dump_parsed");
    std::puts(mactor::config::to_json(parsed.args).c_str());
    return 0;
  } catch (const mactor::config::usage_error& e) {
    std::fputs(e.what(), stderr);
    return 2;
  }
}
