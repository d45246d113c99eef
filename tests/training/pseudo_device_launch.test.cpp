// pretrain_gpt trains with its model on a device: the pseudo-device's harness
// (pretrain_gpt_on_pseudo_device) logs the host run's iteration lines, the same numbers to the
// last printed digit: losses, learning rates, gradient norms, zero counts, params norms. One
// rank (fp32, bf16), tensor, pipeline and data parallelism (the collectives and the pipeline's
// transfers take device tensors through host copies), the distributed optimizer, fp16 loss
// scaling, the per-token loss, Megatron FSDP (ZeRO-3), context parallelism by ring attention,
// all-to-all and all-gather, SGD, fp16 Adam moments, fp8 GEMMs (delayed under TP2, mxfp8), hybrid
// Mamba models (pretrain_mamba: one rank bf16, CP2, TP2 with SP), the zero-bubble schedules (their W pass),
// MoE expert parallelism with delayed weight gradients; checkpoints
// saved on either side and loaded on the other.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "tests/training/checkpoint_compare.hpp"
#include "tests/training/hybrid_flags.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::string flags(const std::string& extra) {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 "
         "--train-iters 6 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 "
         "--weight-decay 0.1 --init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 "
         "--log-interval 1 --eval-interval 3 --eval-iters 1 --seed 7 --hidden-dropout 0.1 --attention-dropout 0.1 "
         "--log-num-zeros-in-grad --log-params-norm " +
         extra;
}

// Returns the host run's and the device run's output.
std::pair<std::string, std::string> check_same_log(const std::string& extra, int ranks = 1) {
  INFO("flags: " << extra);
  const auto host = launch(ranks, flags(extra));
  const auto device = launch(ranks, flags(extra), 0, "pretrain_gpt_on_pseudo_device");
  const auto want = iteration_lines(host.out), got = iteration_lines(device.out);
  REQUIRE(want.size() == 6);
  CHECK(got == want);
  CHECK(parse_losses(device.out).validation == parse_losses(host.out).validation);
  return {host.out, device.out};
}

}  // namespace

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (fp32)") {
  const auto [host, device] = check_same_log("");
  // Megatron's memory report: on the device, its allocator's counts (the model's 0.27 M fp32
  // parameters, their gradients and moments: over 3 MB), not the host process's resident set.
  const auto memory = [](const std::string& log, const char* key) {
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex(std::string(key) + R"(: ([0-9.]+))")));
    return std::stod(m[1]);
  };
  const double allocated = memory(device, "max allocated"), reserved = memory(device, "max reserved");
  CHECK(allocated > 3.0);
  CHECK(reserved >= allocated);
  CHECK(reserved < memory(host, "max reserved") / 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (bf16, Llama-style)") {
  check_same_log("--bf16 --normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear "
                 "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 2");
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (fp16 loss scaling)") {
  check_same_log("--fp16 --initial-loss-scale 4096");
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (DP2 bf16 Adam moments)") {
  check_same_log("--bf16 --use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype bf16 "
                 "--exp-avg-sq-dtype bf16",
                 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (per-token loss)") {
  check_same_log("--calculate-per-token-loss");
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (Megatron FSDP ZeRO-3 DP2)") {
  check_same_log("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --use-distributed-optimizer "
                 "--ckpt-format fsdp_dtensor",
                 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (CP2 Ulysses bf16)") {
  check_same_log("--context-parallel-size 2 --cp-comm-type a2a --bf16", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (CP2 ring attention bf16)") {
  check_same_log("--context-parallel-size 2 --bf16", 2);  // --cp-comm-type p2p, Megatron's default
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (fp8 hybrid delayed, TP2)") {
  // The amaxes reduced over the tensor-parallel group after each chunk's forward and backward.
  check_same_log("--bf16 --fp8-format hybrid --fp8-amax-history-len 4 --tensor-model-parallel-size 2 "
                 "--sequence-parallel",
                 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (fp8 mxfp8)") {
  check_same_log("--bf16 --fp8-format e4m3 --fp8-recipe mxfp8");
}

// A hybrid Mamba model (pretrain_mamba, pattern M*-M): its conv, SSD scan and gated norm on the device.
std::string hybrid_flags(const std::string& extra) {
  return hybrid_model_flags() + " --log-num-zeros-in-grad --log-params-norm " + extra;
}

void check_same_hybrid_log(const std::string& extra, int ranks) {
  INFO("flags: " << extra);
  const auto host = launch(ranks, hybrid_flags(extra), 0, "pretrain_mamba");
  const auto device = launch(ranks, hybrid_flags(extra), 0, "pretrain_mamba_on_pseudo_device");
  const auto want = iteration_lines(host.out);
  REQUIRE(want.size() == 6);
  CHECK(iteration_lines(device.out) == want);
  CHECK(parse_losses(device.out).validation == parse_losses(host.out).validation);
}

TEST_CASE("pretrain_mamba on the pseudo-device logs the host run's iteration lines (hybrid M*-M bf16)") {
  check_same_hybrid_log("--bf16", 1);
}

TEST_CASE("pretrain_mamba on the pseudo-device logs the host run's iteration lines (hybrid CP2 and TP2 with SP)") {
  check_same_hybrid_log("--context-parallel-size 2", 2);
  check_same_hybrid_log("--tensor-model-parallel-size 2 --sequence-parallel", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (SGD with momentum)") {
  check_same_log("--optimizer sgd --sgd-momentum 0.8");
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (DP2 fp16 Adam moments)") {
  check_same_log("--bf16 --use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype fp16 "
                 "--exp-avg-sq-dtype fp16",
                 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (CP2 all-gather)") {
  check_same_log("--context-parallel-size 2 --cp-comm-type allgather", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (ZB-H1 PP2)") {
  check_same_log("--pipeline-model-parallel-size 2 --pipeline-schedule zb-h1", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (ZB-V PP2)") {
  check_same_log("--pipeline-model-parallel-size 2 --pipeline-schedule zbv --num-layers 4 --num-virtual-stages-per-pipeline-rank 2",
                 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (EP2 MoE with delayed weight gradients)") {
  check_same_log("--bf16 --disable-bias-linear --num-experts 4 --moe-router-topk 2 --expert-model-parallel-size 2 "
                 "--moe-token-dispatcher-type alltoall --delay-wgrad-compute --overlap-moe-expert-parallel-comm",
                 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (TP2 with sequence parallelism)") {
  check_same_log("--tensor-model-parallel-size 2 --sequence-parallel", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (PP2)") {
  check_same_log("--pipeline-model-parallel-size 2", 2);
}

TEST_CASE("pretrain_gpt on the pseudo-device logs the host run's iteration lines (DP2 distributed optimizer bf16 overlapped)") {
  check_same_log("--bf16 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather", 2);
}

// Checkpoints cross between the host and the device. A host run and a device run each save at
// iterations 3 and 6; each then resumes from the other's iteration-3 checkpoint and must log the
// uninterrupted run's iterations 4 to 6, to the printed digit. With torch_dist the two
// checkpoints of iteration 6 must also hold the same tensors byte for byte (model, main
// parameters and Adam moments: saved from the device through host copies, loaded by uploads).
void check_checkpoints_cross(const std::string& extra, int ranks, const std::string& name) {
  INFO("flags: " << extra);
  const auto host_dir = scratch_dir("pseudo_device", name + "_host").string();
  const auto device_dir = scratch_dir("pseudo_device", name + "_device").string();
  const auto host = launch(ranks, flags(extra + " --save " + host_dir + " --save-interval 3"));
  const auto device =
      launch(ranks, flags(extra + " --save " + device_dir + " --save-interval 3"), 0, "pretrain_gpt_on_pseudo_device");
  const auto want = iteration_lines(host.out);
  REQUIRE(want.size() == 6);
  CHECK(iteration_lines(device.out) == want);
  if (extra.find("--ckpt-format torch ") == std::string::npos) check_same_tensors(host_dir, device_dir, 6);
  const std::pair<std::string, std::string> resumes[] = {
      {"the host from the device's checkpoint", launch(ranks, flags(extra + " --load " + device_dir + " --ckpt-step 3")).out},
      {"the device from the host's checkpoint",
       launch(ranks, flags(extra + " --load " + host_dir + " --ckpt-step 3"), 0, "pretrain_gpt_on_pseudo_device").out}};
  for (const auto& [who, out] : resumes) {
    INFO(who);
    const auto got = iteration_lines(out);
    REQUIRE(got.size() == 3);
    REQUIRE(got.begin()->first == 4);
    for (const auto& [iteration, fields] : got) {
      INFO("iteration " << iteration);
      CHECK(fields == want.at(iteration));
    }
  }
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (fp32, torch_dist)") {
  check_checkpoints_cross("", 1, "fp32");
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (bf16 distributed optimizer DP2, torch_dist)") {
  check_checkpoints_cross("--bf16 --use-distributed-optimizer", 2, "bf16_distopt");
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (bf16 Adam moments DP2, torch_dist)") {
  check_checkpoints_cross("--bf16 --use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype bf16 "
                          "--exp-avg-sq-dtype bf16",
                          2, "bf16_moments");
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (fp16 Adam moments DP2, torch_dist)") {
  check_checkpoints_cross("--bf16 --use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype fp16 "
                          "--exp-avg-sq-dtype fp16",
                          2, "fp16_moments");
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (SGD momentum buffers, torch_dist)") {
  check_checkpoints_cross("--optimizer sgd --sgd-momentum 0.8", 1, "sgd");
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (bf16 distributed optimizer DP2, torch format)") {
  check_checkpoints_cross("--bf16 --use-distributed-optimizer --ckpt-format torch ", 2, "bf16_distopt_torch");
}

TEST_CASE("checkpoints cross between the host and the pseudo-device (bf16 TP2, torch format)") {
  check_checkpoints_cross("--bf16 --tensor-model-parallel-size 2 --ckpt-format torch ", 2, "bf16_tp2_torch");
}
