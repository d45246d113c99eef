// Exchanging values with a Python reference script through binary files: write the inputs, run
// the script on the folder, read back what it wrote (the dtype-conversion tests).
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mactor::test {

/// `count` values of T from `path`, which must hold at least that many.
template <class T>
std::vector<T> read_all(const std::filesystem::path& path, std::size_t count) {
  std::vector<T> out(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(count * sizeof(T)));
  REQUIRE(in.gcount() == std::streamsize(count * sizeof(T)));
  return out;
}

/// Writes `inputs` to dir/inputs.f32 and runs tests/tensor/<script> on dir; fails the test if
/// the script does.
inline void run_reference_on(const std::filesystem::path& dir, const std::vector<float>& inputs,
                             const std::string& script) {
  {
    std::ofstream out(dir / "inputs.f32", std::ios::binary);
    out.write(reinterpret_cast<const char*>(inputs.data()), std::streamsize(inputs.size() * sizeof(float)));
  }
  const std::string command =
      std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR + "/tests/tensor/" + script + " " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
}

}  // namespace mactor::test
