// Two checkpoints of one iteration compared tensor by tensor, byte for byte.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>

#include "checkpoint/checkpoint_reader.hpp"

namespace mactor::test {

/// Every tensor of `got_dir`'s checkpoint equals `want_dir`'s, byte for byte, under the same names;
/// returns how many of them were optimizer state.
inline int check_same_tensors(const std::filesystem::path& want_dir, const std::filesystem::path& got_dir,
                              std::int64_t iteration) {
  mactor::checkpoint::checkpoint_reader a(want_dir.string(), iteration), b(got_dir.string(), iteration);
  REQUIRE(a.names() == b.names());
  int optimizer_tensors = 0;
  for (const auto& tensor : a.names()) {
    INFO(tensor);
    const auto x = a.read_whole(tensor), y = b.read_whole(tensor);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    optimizer_tensors += tensor.rfind("optimizer.state.", 0) == 0;
  }
  return optimizer_tensors;
}

}  // namespace mactor::test
