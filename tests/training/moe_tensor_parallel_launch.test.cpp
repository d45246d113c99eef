// MoE with tensor parallelism under `mactor`: a tiny Mixtral-style MoE (8 experts, top-2, aux and
// z losses) on sequence-parallel shards, with its experts split over the tensor-parallel ranks
// (--expert-tensor-parallel-size = tp, Megatron's default), over a group of their own (etp other
// than tp) or whole (1), with and without expert parallelism, a shared expert and pipeline stages: each layout logs one process's lm loss,
// load-balancing loss and grad norm (every piece of the model counted once). The z-loss is
// Megatron's: the last tensor-parallel rank's own tokens' mean, so it is checked against a
// second layout whose last tensor-parallel rank routes the same tokens. Checkpoints saved with the
// experts split or whole resume under one process as the uninterrupted run goes on.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_moe_flags.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

std::string moe_flags() { return tiny_moe_flags(); }

struct moe_run {
  logged_losses losses;
  std::vector<double> grad_norm, load_balancing_loss, z_loss, params_norm, zeros;
};

moe_run run_moe(int ranks, const std::string& flags, std::size_t evaluations = 4) {
  const auto r = launch(ranks, flags);
  moe_run m{parse_losses(r.out),
            logged_values(r.out, "grad norm"),
            logged_values(r.out, "load_balancing_loss"),
            logged_values(r.out, "z_loss"),
            logged_values(r.out, "params norm"),
            logged_values(r.out, "num zeros")};
  REQUIRE(m.losses.validation.size() == evaluations);
  return m;
}

// Checks the layout's logged values against the same flags on one process; returns its run.
moe_run check_layout(const std::string& flags, int ranks, const std::string& layout) {
  INFO("layout: " << layout);
  const auto one = run_moe(1, flags);
  REQUIRE(one.losses.train.size() == iterations);
  REQUIRE(one.losses.train.front() != one.losses.train.back());
  const auto spread = run_moe(ranks, flags + " " + layout);
  REQUIRE(spread.losses.train.size() == iterations);
  REQUIRE(spread.grad_norm.size() == iterations);
  check_same(spread.losses.train, one.losses.train, ("lm loss, " + layout).c_str(), ranks);
  check_same(spread.losses.validation, one.losses.validation, ("validation/test lm loss, " + layout).c_str(), ranks);
  check_same(spread.load_balancing_loss, one.load_balancing_loss, ("load_balancing_loss, " + layout).c_str(), ranks);
  // The grad norm is printed with 3 decimals.
  check_same(spread.grad_norm, one.grad_norm, ("grad norm, " + layout).c_str(), ranks, 5e-3);
  if (!one.params_norm.empty()) check_same(spread.params_norm, one.params_norm, ("params norm, " + layout).c_str(), ranks, 1e-4);
  if (!one.zeros.empty()) CHECK(spread.zeros == one.zeros);
  // The last tensor-parallel rank's tokens are half of each micro-batch: its z-loss is near the
  // whole micro-batch's, not equal to it.
  REQUIRE(spread.z_loss.size() == iterations);
  for (std::size_t i = 0; i < iterations; ++i) CHECK(std::abs(spread.z_loss[i] / one.z_loss[i] - 1) < 0.2);
  return spread;
}

}  // namespace

TEST_CASE("MoE with experts split over TP2 x EP2 logs one process's losses and grad norm, and its z-loss is the last TP rank's") {
  const std::string flags = moe_flags() + " --use-distributed-optimizer";
  const auto split = check_layout(flags, 4, "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2");
  // The experts whole on each rank (ETP1): the same tokens reach tensor-parallel rank 1, so the
  // same z-loss (fp32 routing sums: to 1e-5).
  const auto whole = run_moe(4, flags + " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2 "
                                        "--expert-tensor-parallel-size 1");
  check_same(whole.z_loss, split.z_loss, "z_loss, ETP1 vs ETP2", 4);
  check_same(whole.losses.train, split.losses.train, "lm loss, ETP1 vs ETP2", 4);
}

TEST_CASE("MoE with whole experts (ETP1) over TP2 without the distributed optimizer logs one process's params norm and zeros") {
  check_layout(moe_flags() + " --log-params-norm --log-num-zeros-in-grad", 4,
               "--tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1");
}

TEST_CASE("MoE with a shared expert and aux-loss-free expert bias over TP2 x PP2 logs one process's losses") {
  check_layout(moe_flags() + " --moe-shared-expert-intermediate-size 48 --moe-router-score-function sigmoid "
                             "--moe-router-enable-expert-bias --moe-router-bias-update-rate 0.01 --use-distributed-optimizer",
               4, "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2");
}

TEST_CASE("MoE with experts split over their own group (TP4 x ETP2 x EP2, and ETP2 x EP2 without TP) logs one process's losses") {
  const std::string flags = moe_flags() + " --use-distributed-optimizer";
  check_layout(flags, 4, "--tensor-model-parallel-size 4 --sequence-parallel --expert-tensor-parallel-size 2 "
                         "--expert-model-parallel-size 2");
  const auto one = run_moe(1, flags), spread = run_moe(4, flags + " --expert-tensor-parallel-size 2 --expert-model-parallel-size 2");
  check_same(spread.losses.train, one.losses.train, "lm loss, ETP2 x EP2", 4);
  check_same(spread.z_loss, one.z_loss, "z_loss, ETP2 x EP2 (one sequence shard)", 4);
  check_same(spread.grad_norm, one.grad_norm, "grad norm, ETP2 x EP2", 4, 5e-3);
}

TEST_CASE("checkpoints of experts split over TP2 x EP2, whole over TP2 x EP2 and split over TP4 x ETP2 x EP2 resume under one process") {
  const auto one = run_moe(1, moe_flags());
  const std::vector<double> tail(one.losses.train.begin() + 4, one.losses.train.end());
  const std::string tp2 = " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2";
  for (const std::string& layout : std::vector<std::string>{tp2, tp2 + " --expert-tensor-parallel-size 1",
                                   " --tensor-model-parallel-size 4 --sequence-parallel --expert-tensor-parallel-size 2 "
                                   "--expert-model-parallel-size 2"}) {
    INFO("saved under" << layout);
    const auto dir = scratch_dir("moe_tensor_parallel", "save");
    const auto cut = run_moe(4, moe_flags() + layout + " --save " + dir.string() + " --save-interval 4 --exit-interval 4", 1);
    REQUIRE(cut.losses.train.size() == 4);
    const auto resumed = run_moe(1, moe_flags() + " --load " + dir.string(), 3);
    REQUIRE(resumed.losses.train.size() == 4);
    check_same(resumed.losses.train, tail, ("lm loss resumed on 1 from" + layout).c_str(), 1);
  }
}

TEST_CASE("MoE with tensor parallelism is refused without sequence parallelism") {
  const auto r = launch(2, moe_flags() + " --tensor-model-parallel-size 2", 2);
  CHECK(r.err.find("needs --sequence-parallel") != std::string::npos);
}

TEST_CASE("global_aux_loss over TP2 logs one process's losses, and over DP2 counts both replicas' tokens") {
  const std::string flags = moe_flags() + " --moe-router-load-balancing-type global_aux_loss";
  const auto r1 = launch(1, flags), tp2 = launch(2, flags + " --tensor-model-parallel-size 2 --sequence-parallel"),
             dp2 = launch(2, flags);
  const auto one = logged_values(r1.out, "global_load_balancing_loss");
  REQUIRE(one.size() == iterations);
  check_same(logged_values(tp2.out, "global_load_balancing_loss"), one, "global_load_balancing_loss, TP2", 2);
  check_same(parse_losses(tp2.out).train, parse_losses(r1.out).train, "lm loss with global_aux_loss, TP2", 2);
  // Data parallelism changes the tokens each micro-batch's loss counts (the global batch's).
  const auto spread = logged_values(dp2.out, "global_load_balancing_loss");
  REQUIRE(spread.size() == iterations);
  CHECK(spread != one);
  CHECK(logged_values(r1.out, "load_balancing_loss").empty());
}

TEST_CASE("multi-token prediction with a MoE depth over TP2 x EP2 and PP2 x EP2 logs one process's losses") {
  const std::string flags = moe_flags() + " --use-distributed-optimizer --mtp-num-layers 1 --position-embedding-type rope";
  const auto r1 = launch(1, flags);
  const auto one = parse_losses(r1.out);
  REQUIRE(one.train.size() == iterations);
  for (const std::string layout : {"--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2",
                                   "--pipeline-model-parallel-size 2 --expert-model-parallel-size 2"}) {
    INFO("layout: " << layout);
    const auto spread = launch(4, flags + " " + layout);
    check_same(parse_losses(spread.out).train, one.train, ("lm loss with a MoE MTP depth, " + layout).c_str(), 4);
    for (const char* key : {"mtp_1 loss", "load_balancing_loss"}) {
      const auto want = logged_values(r1.out, key);
      REQUIRE(want.size() == iterations);
      check_same(logged_values(spread.out, key), want, (std::string(key) + ", " + layout).c_str(), 4);
    }
    check_same(logged_values(spread.out, "grad norm"), logged_values(r1.out, "grad norm"), ("grad norm, " + layout).c_str(), 4, 5e-3);
  }
}
