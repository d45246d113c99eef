// bench_gpu_train_step's harness, run on the host with its tiny model (the GPU run needs a GPU and
// minutes): pretrain_gpt and the PyTorch script both train, and the table has a row for each with
// positive step times, tokens/s and TFLOP/s. Bad flags exit 2. (Its figures are read by people.)
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

#include "tests/tools/run_command.hpp"

using mactor::test::bin_dir;
using mactor::test::run_shell;

TEST_CASE("bench_gpu_train_step on the host (tiny model) prints a row for mactor and one for PyTorch") {
  const auto r = run_shell(bin_dir() + "/bench_gpu_train_step --model tiny --device cpu --iters 3 --warmup 1");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const std::regex row(R"(^(mactor|pytorch)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+n/a\s+([0-9.]+)$)");
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> seen;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    seen.push_back(m[1]);
    CHECK(std::stod(m[2]) > 0);  // ms per step
    CHECK(std::stod(m[3]) > 0);  // tokens/s
    CHECK(std::stod(m[4]) > 0);  // TFLOP/s
  }
  CHECK(seen == std::vector<std::string>{"mactor", "pytorch"});
  CHECK(r.out.find("mactor tokens/s over PyTorch's") != std::string::npos);
}

TEST_CASE("bench_gpu_train_step refuses bad flags with exit status 2") {
  CHECK(run_shell(bin_dir() + "/bench_gpu_train_step --model 7b").status == 2);
  CHECK(run_shell(bin_dir() + "/bench_gpu_train_step --iters 2 --warmup 2").status == 2);
  CHECK(run_shell(bin_dir() + "/bench_gpu_train_step --device tpu").status == 2);
}
