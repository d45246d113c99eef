// Context parallelism launched with `mactor`: CP2 and CP4 under ring attention (--cp-comm-type
// p2p, the default, which the other layouts run too), CP2 under Ulysses (a2a), all-gathering
// keys and values (allgather) and one choice per layer, CP4 under hierarchical a2a+p2p (2 x 2),
// CP2 x TP2 x PP2 with sequence
// parallelism, and CP2 x DP2 with the distributed optimizer each log the one-process lm loss
// every iteration (fp32, relative difference <= 1e-5) and the same validation loss, with
// dropout on (each row keeps its one-rank mask), RoPE and grouped-query attention; CP2 x TP2 with
// --calculate-per-token-loss and full recomputation too. A checkpoint
// saved under CP2 x DP2 resumes in one process as the uninterrupted run continues.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_cp_flags.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t iterations = 6;

std::string model_flags() { return tiny_cp_flags(); }

const logged_losses& alone() {
  static const logged_losses one = run_job(1, model_flags(), 4, iterations);
  return one;
}

void check_layout(int ranks, const std::string& layout) {
  check_layout_against(alone(), ranks, model_flags(), layout, 4, iterations);
}

}  // namespace

TEST_CASE("CP2 logs the one-process losses") { check_layout(2, "--context-parallel-size 2"); }

TEST_CASE("CP4 logs the one-process losses") { check_layout(4, "--context-parallel-size 4"); }

TEST_CASE("CP2 with --cp-comm-type p2p and a2a and allgather logs the one-process losses") {
  check_layout(2, "--context-parallel-size 2 --cp-comm-type p2p");
  check_layout(2, "--context-parallel-size 2 --cp-comm-type a2a");
  check_layout(2, "--context-parallel-size 2 --cp-comm-type allgather");
  check_layout(2, "--context-parallel-size 2 --cp-comm-type p2p a2a allgather p2p");
}

TEST_CASE("CP4 with --cp-comm-type a2a+p2p over hierarchical groups of 2 x 2, alone and among other layers' types, logs the one-process losses") {
  check_layout(4, "--context-parallel-size 4 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2");
  check_layout(4, "--context-parallel-size 4 --cp-comm-type a2a+p2p p2p allgather a2a+p2p --hierarchical-context-parallel-sizes 2 2");
}

TEST_CASE("CP2 x TP2 x PP2 with sequence parallelism logs the one-process losses") {
  check_layout(8, "--context-parallel-size 2 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                  "--sequence-parallel");
}

TEST_CASE("CP2 x DP2 with the distributed optimizer logs the one-process losses") {
  check_layout(4, "--context-parallel-size 2 --use-distributed-optimizer");
}

TEST_CASE("a checkpoint saved under CP2 x DP2 resumes in one process as the uninterrupted run continues") {
  const fs::path dir = scratch_dir("checkpoints", "cp2_dp2");
  const auto& one = alone();
  const std::string save = " --save " + dir.string() + " --save-interval 3 --exit-interval 3";
  run_job(4, model_flags() + " --context-parallel-size 2 --use-distributed-optimizer" + save, 1, 3);
  const auto resumed = run_job(1, model_flags() + " --load " + dir.string(), 3, 3);
  check_same(resumed.train, {one.train.begin() + 3, one.train.end()}, "lm loss after resuming a CP2 x DP2 checkpoint", 1);
  fs::remove_all(dir);
}

TEST_CASE("CP2 x TP2 with --calculate-per-token-loss and full recomputation logs the one-process losses") {
  const std::string extra = " --calculate-per-token-loss --recompute-granularity full --recompute-method uniform "
                            "--recompute-num-layers 1";
  static const logged_losses one = run_job(1, model_flags() + extra, 4, iterations);
  check_layout_against(one, 4, model_flags() + extra, "--context-parallel-size 2 --tensor-model-parallel-size 2", 4,
                       iterations);
}
