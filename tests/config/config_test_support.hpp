// Helpers shared by the config tests: run the front end on a flag list.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "config/parser.hpp"
#include "config/validate.hpp"

namespace mactor::config::testing {

/// A small, valid GPT configuration; tests add or override flags (later flags win, as in argparse).
inline std::vector<std::string> base_flags() {
  return {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
          "--max-position-embeddings", "32", "--micro-batch-size", "2", "--global-batch-size", "8",
          "--train-iters", "10", "--lr", "1e-3", "--mock-data"};
}

struct validated {
  megatron_args args;
  validation_report report;
  [[nodiscard]] bool has_error(const std::string& part) const {
    for (const auto& e : report.errors)
      if (e.find(part) != std::string::npos) return true;
    return false;
  }
  [[nodiscard]] bool has_warning(const std::string& part) const {
    for (const auto& e : report.warnings)
      if (e.find(part) != std::string::npos) return true;
    return false;
  }
};

inline validated validate_flags(std::vector<std::string> flags, std::int64_t world_size = 1) {
  auto parsed = parse_command_line(flags, "pretrain_gpt");
  validated v{std::move(parsed.args), {}};
  v.report = validate(v.args, {0, world_size});
  return v;
}

inline validated with_base(std::initializer_list<std::string> extra, std::int64_t world_size = 1) {
  auto flags = base_flags();
  flags.insert(flags.end(), extra.begin(), extra.end());
  return validate_flags(flags, world_size);
}

}  // namespace mactor::config::testing
