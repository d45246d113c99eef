// --log-progress: progress.txt's lines in Megatron's format (the throughput text checked against
// Python's own formatting of Megatron's formula), its start-time search, and a job resumed twice
// (the second time on two ranks) writing the lines Megatron writes, the FLOPs carried by checkpoints.
#include "training/progress_log.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "tests/training/launch_support.hpp"

using namespace mactor;
using namespace mactor::test;
namespace fs = std::filesystem;

TEST_CASE("the throughput line after a save is Megatron's text for the same numbers") {
  training::saved_progress p;
  p.iteration = 1200, p.async_save = false, p.world_size = 4;
  p.floating_point_operations = 1.2345e15, p.floating_point_operations_at_start = 2.0e14;
  p.job_seconds = 100.0, p.cumulative_seconds = 250.0, p.cumulative_start_operations = 1.0e13;
  p.tokens = 123456789;
  // Megatron's f-string, evaluated by Python on the same numbers.
  const auto python = run_shell(
      std::string(MACTOR_PYTHON) +
      " -c \"j=(1.2345e15-2.0e14)/(100.0*10**12*4); c=(1.2345e15-1.0e13)/(250.0*10**12*4); "
      "print(f'Saved checkpoint\\tIteration: 1200\\tJob throughput: {j:.1f} TFLOP/s/GPU\\t'"
      "f'Cumulative throughput: {c:.1f} TFLOP/s/GPU\\tFloating-point operations: {1.2345e15:.2e}\\t'"
      "f'Tokens (in billions): {123456789 / 10**9:.2f}', end='')\"");
  REQUIRE(python.status == 0);
  CHECK(training::saved_progress_text(p) == python.out);
  p.async_save = true;
  CHECK_THAT(training::saved_progress_text(p), Catch::StartsWith("Saving async checkpoint\tIteration: 1200\t"));
}

TEST_CASE("the cumulative throughput starts at the first job of this world size since a job of another size") {
  const auto t0 = std::chrono::system_clock::from_time_t(1700000000);
  auto line = [](std::chrono::system_clock::time_point t, int world, const std::string& text) {
    return training::progress_line(t, "42", world, text);
  };
  const std::string file = line(t0, 8, "Starting job") +
                           line(t0 + std::chrono::seconds(10), 8, "Saved checkpoint\tIteration: 2\tJob throughput: 1.0 TFLOP/s/GPU\t"
                                                                  "Cumulative throughput: 1.0 TFLOP/s/GPU\tFloating-point operations: 5.00e+14\tTokens (in billions): 0.01") +
                           line(t0 + std::chrono::seconds(20), 4, "Starting job") +
                           line(t0 + std::chrono::seconds(30), 8, "Starting job") +
                           line(t0 + std::chrono::seconds(40), 8, "Starting job");
  const auto eight = training::progress_start_of(file, 8);
  CHECK(eight.time == t0 + std::chrono::seconds(30));  // the 4-rank job reset the search
  CHECK(eight.floating_point_operations == 5.0e14);   // the last save before it
  // Later jobs of 8 ranks reset the search for 4 too, as Megatron's loop does (it then asserts).
  CHECK_THROWS_WITH(training::progress_start_of(file, 4), Catch::Contains("no 'Starting job' line for 4 ranks"));
  CHECK(training::progress_start_of(file + line(t0 + std::chrono::seconds(50), 4, "Starting job"), 4).time ==
        t0 + std::chrono::seconds(50));
  CHECK_THROWS_WITH(training::progress_start_of(file, 2), Catch::Contains("no 'Starting job' line for 2 ranks"));
  CHECK_THAT(file, Catch::StartsWith(training::progress_line(t0, "42", 8, "Starting job")) &&
                       Catch::Contains("\tJob ID: 42\t# GPUs: 8\tStarting job\n"));
}

TEST_CASE("a job resumed twice, the second time on two ranks, writes Megatron's progress lines") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/progress_log" / std::to_string(getpid());
  fs::remove_all(dir);
  const std::string flags =
      "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
      "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --tokenizer-type NullTokenizer "
      "--vocab-size 4095 --log-interval 1 --eval-iters 0 --seed 7 --log-progress --save-interval 2 "
      "--use-checkpoint-opt-param-scheduler --save " + dir.string();
  for (const auto& [ranks, more] : {std::pair<int, std::string>{1, " --train-iters 4"}, {1, " --train-iters 6 --load " + dir.string()},
                                    {2, " --train-iters 8 --load " + dir.string()}}) {
    const auto r = run_shell(mactor_bin() + " -np " + std::to_string(ranks) + " " + bin_dir() + "/pretrain_gpt " + flags + more);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
  }
  std::ifstream in(dir / "progress.txt");
  std::vector<std::string> kinds;
  std::vector<double> flops;
  static const std::regex saved(R"(\t# GPUs: (\d)\tSaved checkpoint\tIteration: (\d+)\t.*Floating-point operations: ([0-9.e+]+)\tTokens \(in billions\): 0\.00$)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.find("\tStarting job") != std::string::npos) kinds.push_back("start " + line.substr(line.find("# GPUs: ") + 8, 1));
    else if (std::regex_search(line, m, saved)) kinds.push_back("save " + m[1].str() + " " + m[2].str()), flops.push_back(std::stod(m[3]));
    else FAIL("unexpected line: " << line);
  }
  CHECK(kinds == std::vector<std::string>{"start 1", "save 1 2", "save 1 4", "start 1", "save 1 6", "start 2", "save 2 8"});
  REQUIRE(flops.size() == 4);
  for (std::size_t i = 0; i < flops.size(); ++i) {
    INFO("save " << i);
    CHECK(flops[i] == Approx(flops[0] * double(i + 1)).epsilon(0.01));  // the count goes on across checkpoints
  }
}
