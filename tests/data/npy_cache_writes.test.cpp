// The index cache's .npy files as several ranks write them at once: each is written beside its
// place and renamed over it, so a rank that reads the cache meanwhile sees a whole file or none.
// Before, two ranks building the same validation set's cache could let a third read a file
// truncated by the other's open ("not a .npy file (bad magic)", seen in CI).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

#include "data/data_error.hpp"
#include "data/npy.hpp"

namespace fs = std::filesystem;
using namespace mactor;

TEST_CASE("an index cache file written by two ranks at once is never read half written") {
  const fs::path dir = fs::temp_directory_path() / ("mactor_npy_race_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "x-shuffle_index.npy").string();
  std::vector<std::int64_t> values(1 << 18);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i);
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  std::atomic<bool> done{false};
  auto writer = [&] {
    for (int k = 0; k < 60; ++k) data::write_npy(path, "<i8", {n}, values.data(), values.size() * 8);
  };
  std::thread a(writer), b(writer);
  int reads = 0, bad = 0;
  std::string first_error;
  std::thread reader([&] {
    while (!done) {
      if (!fs::is_regular_file(path)) continue;
      try {
        const auto arr = data::read_npy(path);
        ++reads;
        if (data::npy_to_int64(arr, path).size() != values.size()) ++bad;
      } catch (const data::data_error& e) {
        if (first_error.empty()) first_error = e.what();
        ++bad;
      }
    }
  });
  a.join();
  b.join();
  done = true;
  reader.join();
  INFO("first error: " << first_error);
  CHECK(reads > 0);
  CHECK(bad == 0);
  std::size_t leftovers = 0;  // no temporary file stays behind
  for (const auto& e : fs::directory_iterator(dir)) leftovers += e.path().filename().string().find(".tmp-") != std::string::npos;
  CHECK(leftovers == 0);
  fs::remove_all(dir);
}

TEST_CASE("a mapped .npy holds the values written and keeps them after the file is removed") {
  const fs::path dir = fs::temp_directory_path() / ("mactor_npy_map_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "x-sample_index.npy").string();
  std::vector<std::int32_t> values(1000 * 2);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int32_t>(i * 7 - 300);
  data::write_npy(path, "<i4", {1000, 2}, values.data(), values.size() * 4);
  auto m = data::map_npy(path);
  CHECK(m.header.descr == "<i4");
  CHECK(m.header.shape == std::vector<std::int64_t>{1000, 2});
  REQUIRE(m.bytes == values.size() * 4);
  fs::remove_all(dir);  // as the host's ranks remove the shared mock indices once loaded
  const auto* mapped = static_cast<const std::int32_t*>(m.data);
  CHECK(std::vector<std::int32_t>(mapped, mapped + values.size()) == values);
}
