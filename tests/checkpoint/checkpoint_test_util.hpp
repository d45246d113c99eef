// Shared helpers of the checkpoint tests: fresh scratch directories, deterministic tensors, and a
// plain element-by-element slice extractor that the resharding code is checked against.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/tensor_piece.hpp"

namespace mactor::checkpoint::test {

// Removes every scratch directory when the test program exits.
struct scratch_cleanup {
  std::vector<std::filesystem::path> dirs;
  ~scratch_cleanup() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};

inline std::filesystem::path scratch_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  static scratch_cleanup cleanup;
  auto dir = std::filesystem::path(MACTOR_BINARY_DIR) / "checkpoint_scratch" /
             (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  cleanup.dirs.push_back(dir);
  return dir;
}

inline std::vector<float> random_values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

/// The naive reference: element by element, the [begin, end) flat range of the nd slice.
inline std::vector<float> extract(const std::vector<float>& full,
                                  const std::vector<std::int64_t>& global_shape,
                                  const std::vector<std::int64_t>& offset,
                                  const std::vector<std::int64_t>& shape, std::int64_t begin,
                                  std::int64_t end) {
  std::vector<float> out;
  for (std::int64_t i = begin; i < end; ++i) {
    std::int64_t rest = i, flat = 0, stride = 1;
    std::vector<std::int64_t> idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (std::size_t d = shape.size(); d-- > 0;) {
      flat += (offset[d] + idx[d]) * stride;
      stride *= global_shape[d];
    }
    out.push_back(full[static_cast<std::size_t>(flat)]);
  }
  return out;
}

/// A piece of `full` (slice offset/shape, optional flat range) with its data cut out naively.
inline tensor_piece piece_of(const std::string& name, const std::vector<float>& full,
                             std::vector<std::int64_t> global_shape,
                             std::vector<std::int64_t> offset, std::vector<std::int64_t> shape,
                             std::optional<std::pair<std::int64_t, std::int64_t>> range = {}) {
  tensor_piece p;
  p.name = name;
  const auto [b, e] = range ? *range : std::make_pair<std::int64_t, std::int64_t>(0, numel(shape));
  p.data = extract(full, global_shape, offset, shape, b, e);
  p.global_shape = std::move(global_shape);
  p.offset = std::move(offset);
  p.shape = std::move(shape);
  p.flat_range = range;
  return p;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace mactor::checkpoint::test
