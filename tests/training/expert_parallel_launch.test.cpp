// Expert parallelism under `mactor`: a tiny Mixtral-style MoE (8 experts, top-2, aux and z
// losses) with its experts split over 2 or 4 expert-parallel ranks logs one process's lm loss,
// MoE losses and grad norm every iteration, with and without the distributed optimizer (whose
// expert shards then live in the expert-data-parallel group), with overlapped gradient reduction
// and parameter all-gather, with FSDP's sharded gradients (ZeRO-2) and parameters (ZeRO-3,
// torch FSDP2), and with pipeline parallelism. A checkpoint saved under EP2 holds
// the same tensor names as one process's (experts under their global numbers) and resumes under
// one process and under EP4 as the uninterrupted run continues; one saved under ZeRO-3 with EP2
// resumes under EP2 without FSDP, and one process's resumes under ZeRO-3 with EP2.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include "checkpoint/checkpoint_reader.hpp"
#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_moe_flags.hpp"

namespace fs = std::filesystem;
using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

std::string moe_flags() { return tiny_moe_flags() + " --use-distributed-optimizer"; }

struct moe_run {
  logged_losses losses;
  std::vector<double> grad_norm, load_balancing_loss, z_loss;
};

moe_run run_moe(int ranks, const std::string& flags, std::size_t evaluations = 4) {
  const auto r = launch(ranks, flags);
  moe_run m{parse_losses(r.out), logged_values(r.out, "grad norm"), logged_values(r.out, "load_balancing_loss"),
            logged_values(r.out, "z_loss")};
  REQUIRE(m.losses.validation.size() == evaluations);
  return m;
}

const moe_run& alone() {
  static const moe_run one = run_moe(1, moe_flags());
  return one;
}

// With tensor parallelism Megatron logs the last tensor-parallel rank's z_loss (of its own
// sequence shard), which is not the one-process value: compare_z_loss = false then.
void check_layout(int ranks, const std::string& layout, bool compare_z_loss = true) {
  INFO("layout: " << layout);
  const auto& one = alone();
  REQUIRE(one.losses.train.size() == iterations);
  REQUIRE(one.losses.train.front() != one.losses.train.back());
  const auto spread = run_moe(ranks, moe_flags() + " " + layout);
  REQUIRE(spread.losses.train.size() == iterations);
  REQUIRE(spread.grad_norm.size() == iterations);
  check_same(spread.losses.train, one.losses.train, ("EP lm loss, " + layout).c_str(), ranks);
  check_same(spread.losses.validation, one.losses.validation, ("EP validation/test lm loss, " + layout).c_str(), ranks);
  check_same(spread.load_balancing_loss, one.load_balancing_loss, ("EP load_balancing_loss, " + layout).c_str(), ranks);
  if (compare_z_loss) check_same(spread.z_loss, one.z_loss, ("EP z_loss, " + layout).c_str(), ranks);
  // The grad norm is printed with 3 decimals; every expert must be counted exactly once.
  check_same(spread.grad_norm, one.grad_norm, ("EP grad norm, " + layout).c_str(), ranks, 5e-3);
}

}  // namespace

TEST_CASE("experts over 2 expert-parallel ranks log one process's losses and grad norm") {
  check_layout(2, "--expert-model-parallel-size 2");
  // The flex dispatcher with DeepEP (DeepSeek-V3's scripts) moves the same tokens to the same experts.
  check_layout(2, "--expert-model-parallel-size 2 --moe-token-dispatcher-type flex --moe-enable-deepep");
}

TEST_CASE("experts over EP2 x expert-DP2 with overlapped grad reduce and param gather log one process's losses") {
  check_layout(4, "--expert-model-parallel-size 2 --overlap-grad-reduce --overlap-param-gather");
}

TEST_CASE("experts over EP4 without the distributed optimizer log one process's losses, params norm and zeros") {
  const std::string extra = " --log-params-norm --log-num-zeros-in-grad";
  std::string flags = moe_flags() + extra;
  flags = std::regex_replace(flags, std::regex(" --use-distributed-optimizer"), "");
  const auto one = launch(1, flags), spread = launch(4, flags + " --expert-model-parallel-size 4");
  const auto a = iteration_lines(one.out), b = iteration_lines(spread.out);
  REQUIRE(a.size() == iterations);
  REQUIRE(b.size() == iterations);
  check_same(logged_values(spread.out, "params norm"), logged_values(one.out, "params norm"), "EP4 params norm", 4, 1e-4);
  check_same(logged_values(spread.out, "lm loss"), logged_values(one.out, "lm loss"), "EP4 lm loss", 4);
  CHECK(logged_values(spread.out, "num zeros") == logged_values(one.out, "num zeros"));
}

TEST_CASE("experts over EP2 x CP2 (the expert-parallel ranks spanning the context-parallel ones) train as one process with halved aux coefficients") {
  // Megatron's CP leaves the auxiliary losses' gradients unscaled (tests/training/moe_launch.test.cpp).
  std::string halved = moe_flags();
  halved.replace(halved.find("--moe-aux-loss-coeff 0.1 --moe-z-loss-coeff 0.01"), 48,
                 "--moe-aux-loss-coeff 0.05 --moe-z-loss-coeff 0.005");
  const auto one = run_moe(1, halved);
  const auto spread = run_moe(4, moe_flags() + " --expert-model-parallel-size 2 --context-parallel-size 2");
  check_same(spread.losses.train, one.losses.train, "EP lm loss, EP2 x CP2", 4);
  check_same(spread.losses.validation, one.losses.validation, "EP validation/test lm loss, EP2 x CP2", 4);
  check_same(spread.load_balancing_loss, one.load_balancing_loss, "EP load_balancing_loss, EP2 x CP2", 4);
  check_same(spread.z_loss, one.z_loss, "EP z_loss, EP2 x CP2", 4);
  check_same(spread.grad_norm, one.grad_norm, "EP grad norm, EP2 x CP2", 4, 5e-3);
}

TEST_CASE("FSDP's sharded gradients (optim_grads) with the experts over their own groups log one process's losses") {
  // The experts' gradients are reduce-scattered over the expert-data-parallel group after each
  // backward, the dense ones over the data-parallel group: EP2 on 4 ranks (both sharded over 2),
  // EP2 on 2 ranks (the experts have no replica: this rank keeps their whole gradients), and
  // TP2 with whole experts (ETP1) over EP2.
  const std::string zero2 = "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy optim_grads ";
  check_layout(4, zero2 + "--expert-model-parallel-size 2");
  check_layout(2, zero2 + "--expert-model-parallel-size 2");
  check_layout(4,
               zero2 + "--tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1 "
                       "--expert-model-parallel-size 2",
               false);
}

TEST_CASE("FSDP's sharded parameters (optim_grads_params) with the experts over their own groups log one process's losses") {
  // Each rank keeps a slice of the dense parameters (over the data-parallel group) and one of its
  // experts (over the expert-data-parallel group) side by side; before each compute every region
  // is all-gathered over its own group. EP2 on 4 ranks (both sharded over 2), EP2 on 2 ranks (the
  // experts have no replica: this rank keeps them whole), TP2 with whole experts (ETP1) over EP2
  // (the dense parameters over 2, the experts over 2), TP2 with the experts over ETP2 x EP2 (no
  // expert replica: Megatron's ZeRO-3 MoE functional test's layout), and with --fsdp-double-buffer.
  const std::string zero3 = "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy optim_grads_params ";
  check_layout(4, zero3 + "--expert-model-parallel-size 2");
  check_layout(2, zero3 + "--expert-model-parallel-size 2");
  check_layout(4,
               zero3 + "--tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1 "
                       "--expert-model-parallel-size 2",
               false);
  check_layout(4, zero3 + "--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2", false);
  check_layout(4, zero3 + "--expert-model-parallel-size 2 --fsdp-double-buffer");
}

TEST_CASE("ZeRO-3 with EP2 and a bf16 model logs ZeRO-2's losses exactly and one process's within bf16 rounding") {
  // The fp32 main parameters are a shard of two ranges beside the bf16 values shard. ZeRO-3
  // changes only where the values live between computes: the same reduce-scatters as ZeRO-2, so
  // the same losses bit for bit. Against one process the 16-bit gradients sum in another order
  // (as under plain EP2): 1e-4, as the dense bf16 ZeRO-3 test (tests/training/fsdp_launch.test.cpp).
  const std::string bf16 = moe_flags() + " --bf16 --expert-model-parallel-size 2 --use-megatron-fsdp "
                                         "--ckpt-format fsdp_dtensor --data-parallel-sharding-strategy ";
  const auto zero2 = run_moe(4, bf16 + "optim_grads"), zero3 = run_moe(4, bf16 + "optim_grads_params");
  check_same(zero3.losses.train, zero2.losses.train, "EP lm loss, bf16 ZeRO-3 vs ZeRO-2 EP2", 4, 0);
  check_same(zero3.losses.validation, zero2.losses.validation, "EP validation/test lm loss, bf16 ZeRO-3 vs ZeRO-2 EP2", 4, 0);
  check_same(zero3.load_balancing_loss, zero2.load_balancing_loss, "EP load_balancing_loss, bf16 ZeRO-3 vs ZeRO-2 EP2", 4, 0);
  const auto one = run_moe(1, moe_flags() + " --bf16");
  check_same(zero3.losses.train, one.losses.train, "EP lm loss, bf16 ZeRO-3 EP2", 4, 1e-4);
  check_same(zero3.losses.validation, one.losses.validation, "EP validation/test lm loss, bf16 ZeRO-3 EP2", 4, 1e-4);
}

TEST_CASE("torch FSDP2 with whole experts (ETP1) under TP2 logs one process's losses, and with EP Megatron's refusal stays") {
  // Megatron refuses FSDP2 with expert parallelism; with --expert-tensor-parallel-size 1 under
  // TP2 the experts still shard over their own (expert-data-parallel) group of 4, the dense
  // parameters over the data-parallel group of 2.
  std::string flags = std::regex_replace(moe_flags(), std::regex(" --use-distributed-optimizer"), "") +
                      " --untie-embeddings-and-output-weights";
  const auto one = run_moe(1, flags);
  flags += " --use-torch-fsdp2 --no-gradient-accumulation-fusion";
  const auto spread = run_moe(4, flags + " --tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1");
  check_same(spread.losses.train, one.losses.train, "EP lm loss, FSDP2 TP2 ETP1", 4);
  check_same(spread.losses.validation, one.losses.validation, "EP validation/test lm loss, FSDP2 TP2 ETP1", 4);
  check_same(spread.grad_norm, one.grad_norm, "EP grad norm, FSDP2 TP2 ETP1", 4, 5e-3);
  const auto refused = launch(2, flags + " --expert-model-parallel-size 2", 2);
  CHECK(refused.err.find("--use-torch-fsdp2 is not supported with expert parallelism") != std::string::npos);
}

TEST_CASE("a checkpoint saved under ZeRO-3 with EP2 resumes under EP2 without FSDP, and one process's under ZeRO-3 with EP2") {
  const auto dir = scratch_dir("expert_parallel", "zero3_save");
  const std::string zero3 = " --use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy optim_grads_params";
  const std::vector<double> tail(alone().losses.train.begin() + 4, alone().losses.train.end());
  // Each rank saves its slices of both regions (experts under their global numbers).
  const std::string save = " --save-interval 4 --exit-interval 4 --save ";
  const auto cut = run_moe(4, moe_flags() + zero3 + " --expert-model-parallel-size 2" + save + (dir / "zero3").string(), 1);
  REQUIRE(cut.losses.train.size() == 4);
  const auto resumed = run_moe(2, moe_flags() + " --expert-model-parallel-size 2 --load " + (dir / "zero3").string(), 3);
  REQUIRE(resumed.losses.train.size() == 4);
  check_same(resumed.losses.train, tail, "lm loss resumed under EP2 from ZeRO-3 EP2", 2);
  // And back: one process's checkpoint loads into each rank's two slices.
  run_moe(1, moe_flags() + save + (dir / "alone").string(), 1);
  const auto loaded = run_moe(4, moe_flags() + zero3 + " --expert-model-parallel-size 2 --load " + (dir / "alone").string(), 3);
  REQUIRE(loaded.losses.train.size() == 4);
  check_same(loaded.losses.train, tail, "lm loss resumed under ZeRO-3 EP2 from one process", 4);
  fs::remove_all(dir);
}

TEST_CASE("experts over EP2 x PP2 log one process's losses") {
  check_layout(4, "--expert-model-parallel-size 2 --pipeline-model-parallel-size 2");
}

TEST_CASE("an EP2 checkpoint names experts globally and resumes under one process and under EP4") {
  const auto dir = scratch_dir("expert_parallel", "ep2_save");
  const std::string save = " --save " + dir.string() + " --save-interval 4 --exit-interval 4";
  const auto cut = run_moe(2, moe_flags() + " --expert-model-parallel-size 2" + save, 1);
  REQUIRE(cut.losses.train.size() == 4);
  // The same tensors as a one-process checkpoint of the same model.
  const auto one_dir = scratch_dir("expert_parallel", "one_save");
  run_moe(1, moe_flags() + " --save " + one_dir.string() + " --save-interval 4 --exit-interval 4", 1);
  mactor::checkpoint::checkpoint_reader ep2(dir.string(), 4), one(one_dir.string(), 4);
  CHECK(ep2.names() == one.names());
  std::size_t experts = 0;
  for (const auto& n : ep2.names()) experts += n.find("local_experts.7.linear_fc1.weight") != std::string::npos;
  CHECK(experts >= 3);  // expert 7 of each MoE layer, saved by expert-parallel rank 1 (and its state)
  for (const int ranks : {1, 4}) {
    INFO("resumed on " << ranks << " ranks");
    const std::string layout = ranks == 4 ? " --expert-model-parallel-size 4" : "";
    const auto resumed = run_moe(ranks, moe_flags() + layout + " --load " + dir.string(), 3);
    REQUIRE(resumed.losses.train.size() == 4);
    const std::vector<double> tail(alone().losses.train.begin() + 4, alone().losses.train.end());
    check_same(resumed.losses.train, tail, ("lm loss resumed from EP2 on " + std::to_string(ranks)).c_str(), ranks);
  }
}

TEST_CASE("an expert-parallel size (--expert-model-parallel-size) that does not divide the experts or the ranks is refused") {
  const auto r = launch(2, moe_flags() + " --expert-model-parallel-size 3", 2);
  CHECK(r.err.find("--expert-model-parallel-size") != std::string::npos);
}

TEST_CASE("aux-loss-free expert bias under EP2 logs one process's losses, and its checkpoint carries the bias") {
  const std::string flags = moe_flags() + " --moe-router-score-function sigmoid --moe-router-enable-expert-bias "
                                          "--moe-router-bias-update-rate 0.01";
  const auto one = run_moe(1, flags);
  REQUIRE(one.losses.train.size() == iterations);
  // The bias moves the routing: the run departs from the same model without it.
  const auto unbiased = run_moe(1, moe_flags() + " --moe-router-score-function sigmoid");
  REQUIRE(unbiased.losses.train.size() == iterations);
  CHECK(unbiased.losses.train.front() == one.losses.train.front());
  double most = 0;
  for (std::size_t i = 0; i < iterations; ++i)
    most = std::max(most, std::abs(unbiased.losses.train[i] - one.losses.train[i]) / one.losses.train[i]);
  CHECK(most > 1e-4);
  const auto spread = run_moe(2, flags + " --expert-model-parallel-size 2");
  check_same(spread.losses.train, one.losses.train, "expert-bias lm loss, EP2", 2);
  // Saved at 3 under EP2, resumed on one process: the bias must come back with the weights.
  const auto dir = scratch_dir("expert_parallel", "bias_save");
  run_moe(2, flags + " --expert-model-parallel-size 2 --save " + dir.string() + " --save-interval 3 --exit-interval 3", 0);
  mactor::checkpoint::checkpoint_reader saved(dir.string(), 3);
  REQUIRE(saved.has("decoder.layers.1.mlp.router.expert_bias"));
  // Three updates of +-0.01 (or 0) each: every entry is a multiple of 0.01 of size at most 0.03.
  const auto bias = saved.read_whole("decoder.layers.1.mlp.router.expert_bias");
  REQUIRE(bias.size() == 8);
  bool moved = false;
  for (float b : bias) {
    INFO("bias " << b);
    CHECK((std::abs(b) <= 0.0301f && std::abs(std::round(b / 0.01f) * 0.01f - b) < 1e-6f));
    moved = moved || b != 0.0f;
  }
  CHECK(moved);
  const auto resumed = run_moe(1, flags + " --load " + dir.string(), 4);
  const std::vector<double> tail(one.losses.train.begin() + 3, one.losses.train.end());
  check_same(resumed.losses.train, tail, "expert-bias lm loss resumed from EP2", 1, 1e-6);
}

// --moe-use-legacy-grouped-gemm: Megatron's GroupedMLP computes SequentialMLP's numbers (on the
// CPU a grouped GEMM is one GEMM per expert) and its sharded state dict names the experts as
// SequentialMLP does, so the two start from the same weights and load each other's checkpoints.
TEST_CASE("the legacy GroupedMLP under EP2 logs SequentialMLP's losses and saves SequentialMLP's names") {
  const std::string bf16 = moe_flags() + " --bf16 --expert-model-parallel-size 2";
  const std::string grouped = bf16 + " --moe-grouped-gemm", legacy = grouped + " --moe-use-legacy-grouped-gemm";
  const auto legacy_run = run_moe(2, legacy), sequential_run = run_moe(2, bf16);
  REQUIRE(legacy_run.losses.train.size() == iterations);
  // Its experts sit in TEGroupedMLP's order in the gradient buffer (every fc1, then every fc2),
  // so the grad norm's sum, and the bf16 rounding after it, may differ in the last bits.
  check_same(legacy_run.losses.train, sequential_run.losses.train, "lm loss, legacy GroupedMLP vs SequentialMLP", 2, 1e-3);

  const auto dir = scratch_dir("expert_parallel", "legacy_grouped");
  const std::string cut = " --save-interval 4 --exit-interval 4 --save ";
  run_moe(2, legacy + cut + (dir / "legacy").string(), 1);
  run_moe(2, bf16 + cut + (dir / "sequential").string(), 1);
  run_moe(2, grouped + cut + (dir / "te").string(), 1);
  mactor::checkpoint::checkpoint_reader legacy_ckpt((dir / "legacy").string(), 4),
      sequential_ckpt((dir / "sequential").string(), 4), te_ckpt((dir / "te").string(), 4);
  CHECK(legacy_ckpt.names() == sequential_ckpt.names());
  CHECK(legacy_ckpt.names() != te_ckpt.names());  // TEGroupedMLP's experts.linear_fc1.weight<i>

  // A run without grouped GEMM resumes it. Its experts sit in another order in the gradient
  // buffer, so the grad norm's sum (and the bf16 rounding after it) may differ in the last bits.
  const auto resumed = run_moe(2, bf16 + " --load " + (dir / "legacy").string(), 3);
  REQUIRE(resumed.losses.train.size() == 4);
  const std::vector<double> tail(legacy_run.losses.train.begin() + 4, legacy_run.losses.train.end());
  check_same(resumed.losses.train, tail, "lm loss, SequentialMLP resumed from the legacy GroupedMLP", 2, 1e-3);
}
