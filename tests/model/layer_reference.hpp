// One layer's run exchanged with a PyTorch reference script: the test writes the layer's
// parameters (named in params.txt, param_<i>.bin), its input and output gradient (x.bin, dout.bin)
// as fp64 files into a folder that already holds the script's config.txt, runs the script there
// (the project's .venv Python when present), and reads back the reference's output, input
// gradient and parameter gradients (out.bin, dx.bin, grad_<i>.bin).
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mactor::test {

/// A layer's forward and backward: what the test feeds it and what it gives back.
struct layer_run {
  std::vector<double> x, dout, out, dx;
  std::vector<std::string> names;
  std::vector<std::vector<double>> params, grads;
};

template <class T>
void write_doubles(const std::filesystem::path& path, const std::vector<T>& v) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
}

inline std::vector<double> read_doubles(const std::filesystem::path& path, std::size_t n) {
  std::vector<double> v(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  REQUIRE(in.gcount() == std::streamsize(n * sizeof(double)));
  return v;
}

/// Runs tests/model/<script> on `dir` for `ours` (its names, params, x and dout); the result holds
/// the reference's out, dx and grads, sized as ours.
inline layer_run run_layer_reference(const std::filesystem::path& dir, const std::string& script, const layer_run& ours) {
  std::ofstream list(dir / "params.txt");
  for (std::size_t i = 0; i < ours.names.size(); ++i) {
    list << ours.names[i] << "\n";
    write_doubles(dir / ("param_" + std::to_string(i) + ".bin"), ours.params[i]);
  }
  list.close();
  write_doubles(dir / "x.bin", ours.x);
  write_doubles(dir / "dout.bin", ours.dout);
  const std::filesystem::path venv = std::filesystem::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  const std::string command = (std::filesystem::exists(venv) ? venv.string() : std::string("python3")) + " " +
                              MACTOR_SOURCE_DIR + "/tests/model/" + script + " " + dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
  layer_run ref;
  ref.out = read_doubles(dir / "out.bin", ours.out.size());
  ref.dx = read_doubles(dir / "dx.bin", ours.dx.size());
  for (std::size_t i = 0; i < ours.names.size(); ++i)
    ref.grads.push_back(read_doubles(dir / ("grad_" + std::to_string(i) + ".bin"), ours.grads[i].size()));
  return ref;
}

}  // namespace mactor::test
