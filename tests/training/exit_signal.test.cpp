// --exit-signal-handler: SIGTERM to `mactor` reaches every rank, the job saves at the end of the
// iteration it arrived in, prints Megatron's line and exits 0; the checkpoint resumes. Without the
// flag the ranks die of the signal and mactor reports it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "checkpoint/layout.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

std::string flags(const fs::path& dir) {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 100000 --lr 1e-3 "
         "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-iters 0 --seed 7 "
         "--pipeline-model-parallel-size 2 --save " + dir.string() + " --save-interval 100000";
}

// Starts the job in the background, sends SIGTERM to mactor once iteration 3 is logged, and
// returns mactor's status and output.
run_result terminated_run(const std::string& job_flags, const fs::path& dir) {
  const std::string job = mactor_bin() + " --kill-grace 60 -np 2 --oversubscribe " + bin_dir() + "/pretrain_gpt " + job_flags;
  const fs::path log = dir / "log", script = dir / "terminate.sh";
  std::ofstream(script) << "(" << job << ") > " << log.string() << " 2>&1 &\n"
                        << "pid=$!\n"
                        << "for i in $(seq 1 600); do grep -q 'iteration        3/' " << log.string()
                        << " && break; sleep 0.1; done\n"
                        << "kill -TERM $pid\nwait $pid\nstatus=$?\ncat " << log.string() << "\nexit $status\n";
  return run_shell("bash " + script.string());
}

std::int64_t last_logged_iteration(const std::string& out) {
  static const std::regex line(R"(iteration +(\d+)/)");
  std::int64_t last = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    last = std::stoll((*it)[1]);
  return last;
}

}  // namespace

TEST_CASE("with --exit-signal-handler a SIGTERM saves at the end of the iteration, exits 0, and the checkpoint resumes") {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/exit_signal" / std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto r = terminated_run(flags(dir / "ckpt") + " --exit-signal-handler", dir);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("[exiting program after receiving SIGTERM.] datetime:"));
  const std::int64_t stopped = last_logged_iteration(r.out);
  CHECK(stopped >= 3);
  REQUIRE(mactor::checkpoint::read_tracker((dir / "ckpt").string()) == stopped);
  // The saved job goes on from the next iteration.
  const auto resumed = run_shell(mactor_bin() + " -np 2 --oversubscribe " + bin_dir() + "/pretrain_gpt " +
                                 std::regex_replace(flags(dir / "ckpt"), std::regex("--train-iters 100000"),
                                                    "--train-iters " + std::to_string(stopped + 2)) +
                                 " --use-checkpoint-opt-param-scheduler --load " + (dir / "ckpt").string());
  INFO(resumed.out << resumed.err);
  CHECK(resumed.status == 0);
  CHECK_THAT(resumed.out, Catch::Contains("iteration " + std::string(8 - std::to_string(stopped + 1).size(), ' ') +
                                          std::to_string(stopped + 1) + "/"));

  SECTION("without the flag the ranks die of the signal and mactor exits 128 + 15") {
    const auto killed = terminated_run(flags(dir / "other"), dir);
    INFO(killed.out);
    CHECK(killed.status == 128 + 15);
    CHECK_THAT(killed.out, !Catch::Contains("exiting program after receiving SIGTERM"));
  }
}
