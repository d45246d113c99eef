// --num-distributed-optimizer-instances with the experts on groups of their own, launched with
// `mactor`: the experts' distributed-optimizer shards split over one instance's part of the
// expert-data-parallel group and summed over the instances (Megatron's intra- and inter-partial
// expert groups). Each layout logs the losses, grad norm, params norm and zeros of the same run with
// one instance and of one process (to 1e-5 relative: the instances sum each shard in another order
// than one reduce-scatter over every replica; the grad norm to its 3 printed decimals), under
// Megatron FSDP's hybrid sharding too, and a checkpoint saved with two instances resumes in one
// process as the uninterrupted run goes on.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_moe_flags.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

std::string flags() { return tiny_moe_flags() + " --use-distributed-optimizer --log-params-norm --log-num-zeros-in-grad"; }

const std::string two_instances = " --num-distributed-optimizer-instances 2";

struct run_values {
  logged_losses losses;
  std::vector<double> grad_norm, params_norm, zeros, load_balancing_loss;
};

run_values run(int ranks, const std::string& f, std::size_t evaluations = 4) {
  const auto r = launch(ranks, f);
  run_values v{parse_losses(r.out), logged_values(r.out, "grad norm"), logged_values(r.out, "params norm"),
               logged_values(r.out, "num zeros"), logged_values(r.out, "load_balancing_loss")};
  REQUIRE(v.losses.validation.size() == evaluations);
  return v;
}

const run_values& alone() {
  static const run_values one = run(1, flags());
  return one;
}

void check_against(const run_values& got, const run_values& want, const std::string& what, int ranks) {
  REQUIRE(got.losses.train.size() == iterations);
  REQUIRE(got.grad_norm.size() == iterations);
  REQUIRE(got.params_norm.size() == iterations);
  check_same(got.losses.train, want.losses.train, ("lm loss, " + what).c_str(), ranks);
  check_same(got.losses.validation, want.losses.validation, ("validation/test lm loss, " + what).c_str(), ranks);
  check_same(got.load_balancing_loss, want.load_balancing_loss, ("load_balancing_loss, " + what).c_str(), ranks);
  check_same(got.grad_norm, want.grad_norm, ("grad norm, " + what).c_str(), ranks, 5e-3);
  check_same(got.params_norm, want.params_norm, ("params norm, " + what).c_str(), ranks, 1e-4);
  CHECK(got.zeros == want.zeros);
}

// `layout` on `ranks` processes with two instances against the same with one and against one process.
void check_instances(int ranks, const std::string& layout) {
  INFO("layout: " << layout);
  const auto& one = alone();
  REQUIRE(one.losses.train.front() != one.losses.train.back());
  const auto single = run(ranks, flags() + layout);
  const auto two = run(ranks, flags() + layout + two_instances);
  check_against(two, single, layout + ", 2 instances vs 1", ranks);
  check_against(two, one, layout + ", 2 instances vs one process", ranks);
}

}  // namespace

TEST_CASE("EP2 over DP4 with two optimizer instances (each expert's shard whole in its instance) logs one instance's and one process's values") {
  check_instances(4, " --expert-model-parallel-size 2");
}

TEST_CASE("TP2 x EP2 with whole experts (ETP1) over 8 ranks with two instances (the experts' shards split in each) logs one instance's and one process's values") {
  check_instances(8, " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2 "
                     "--expert-tensor-parallel-size 1");
}

TEST_CASE("EP2 over DP4 under Megatron FSDP's hybrid sharding (ZeRO-2 and ZeRO-3 with two instances) logs one process's values") {
  for (const char* strategy : {"optim_grads", "optim_grads_params"})
    check_against(run(4, flags() + " --expert-model-parallel-size 2 --use-megatron-fsdp --ckpt-format fsdp_dtensor "
                                   "--data-parallel-sharding-strategy " + std::string(strategy) + two_instances),
                  alone(), std::string("EP2 under HSDP ") + strategy, 4);
}

TEST_CASE("a checkpoint saved by EP2 with two optimizer instances resumes in one process") {
  const auto& one = alone();
  const std::vector<double> tail(one.losses.train.begin() + 4, one.losses.train.end());
  const auto dir = scratch_dir("moe_optimizer_instances", "save");
  const auto cut = run(4, flags() + " --expert-model-parallel-size 2" + two_instances + " --save " + dir.string() +
                              " --save-interval 4 --exit-interval 4",
                       1);
  REQUIRE(cut.losses.train.size() == 4);
  const auto resumed = run(1, flags() + " --load " + dir.string(), 3);
  REQUIRE(resumed.losses.train.size() == 4);
  check_same(resumed.losses.train, tail, "lm loss resumed on 1 from EP2 with two instances", 1);
  std::filesystem::remove_all(dir);
}
