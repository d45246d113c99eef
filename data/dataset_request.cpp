// --data-path parsing and per-split sample counts, as Megatron computes them.
#include "data/dataset_request.hpp"

#include <cstdlib>

#include "data/data_error.hpp"

namespace mactor::data {
namespace {

std::string strip(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
}

// Python's float(s) for the forms data paths use; nullopt when it would raise ValueError.
std::optional<double> py_float(const std::string& s) {
  const std::string t = strip(s);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

}  // namespace

data_blend blend_from_list(const std::vector<std::string>& words) {
  data_blend b;
  bool weighted = words.size() % 2 == 0;
  if (weighted) {
    bool seen_none = false;
    for (std::size_t i = 0; i < words.size(); i += 2) {
      auto w = py_float(words[i]);
      if (!w) {
        seen_none = true;
      } else if (seen_none) {
        throw data_error("--data-path: '" + words[i] + "' looks like a weight but '" + words[i - 2] +
                         "' before it does not; give weight/prefix pairs for every dataset or prefixes only");
      } else {
        b.weights.push_back(*w);
      }
    }
    // As Megatron: numbers before the first non-number are fine; then it is all prefixes.
    if (seen_none) weighted = false;
  }
  if (weighted) {
    for (std::size_t i = 1; i < words.size(); i += 2) b.prefixes.push_back(strip(words[i]));
  } else {
    b.weights.clear();
    for (const auto& w : words) b.prefixes.push_back(strip(w));
  }
  return b;
}

std::array<std::optional<std::int64_t>, 3> train_valid_test_num_samples(const sample_count_args& a) {
  std::array<std::optional<std::int64_t>, 3> n;
  n[0] = a.train_samples ? *a.train_samples : a.train_iters * a.global_batch_size;
  if (!a.full_validation) {
    if (a.eval_interval <= 0) throw data_error("--eval-interval must be positive");
    n[1] = (a.train_iters / a.eval_interval + 1) * a.eval_iters * a.global_batch_size;
  }
  n[2] = a.eval_iters * a.global_batch_size;
  return n;
}

}  // namespace mactor::data
