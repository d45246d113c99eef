// pretrain_gpt on a real GPU (MACTOR_DEVICE=cuda: the CUDA backend module loaded, the model, its
// main parameters and Adam's moments on device 0) against the same run on the host: every
// iteration's loss within 1e-4 (relative) in fp32 and 2e-2 in bf16, the gradient norms within
// 1e-3 and 5e-2 (the GEMMs' and reductions' orders differ from the host's), the validation losses
// too. A checkpoint saved on the GPU resumes on the host with the uninterrupted run's losses.
// Skipped (status 77) where pretrain_gpt finds no usable GPU.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/require_cuda_device.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::string flags(const std::string& extra) {
  return "--mock-data --num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 "
         "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 "
         "--train-iters 6 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 "
         "--weight-decay 0.1 --init-method-std 0.02 --tokenizer-type NullTokenizer --vocab-size 1023 "
         "--log-interval 1 --eval-interval 3 --eval-iters 1 --seed 7 --hidden-dropout 0.1 --attention-dropout 0.1 "
         "--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear "
         "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 2 " +
         extra;
}

run_result on_gpu(const std::string& flags_text) {
  mactor::testing::require_cuda_device();
  const auto command = "MACTOR_DEVICE=cuda " + launch_command(1, flags_text);
  auto r = run_shell(command);
  INFO(command << "\nstdout tail:\n" << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0) << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  return r;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tolerance, const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("entry " << i << ": " << got[i] << " against the host's " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tolerance * std::abs(want[i]));
  }
}

void check_against_host(const std::string& extra, double loss_tolerance, double norm_tolerance) {
  const auto gpu = on_gpu(flags(extra));
  const auto host = launch(1, flags(extra));
  const auto got = parse_losses(gpu.out), want = parse_losses(host.out);
  REQUIRE(want.train.size() == 6);
  check_close(got.train, want.train, loss_tolerance, "lm loss");
  check_close(got.validation, want.validation, loss_tolerance, "validation lm loss");
  check_close(logged_values(gpu.out, "grad norm"), logged_values(host.out, "grad norm"), norm_tolerance, "grad norm");
  // The memory report reads the device's allocator, which holds the model: more than 0.1 MB.
  const auto allocated = logged_values(gpu.out + " |", "max allocated");
  REQUIRE(allocated.size() == 1);
  CHECK(allocated[0] > 0.1);
}

}  // namespace

TEST_CASE("pretrain_gpt on a GPU logs the host run's losses (fp32)") { check_against_host("", 1e-4, 1e-3); }

TEST_CASE("pretrain_gpt on a GPU logs the host run's losses (bf16 distributed optimizer)") {
  check_against_host("--bf16 --use-distributed-optimizer", 2e-2, 5e-2);
}

TEST_CASE("a checkpoint pretrain_gpt saved on a GPU resumes on the host") {
  const auto dir = scratch_dir("pretrain_gpt_on_cuda", "save").string();
  const auto gpu = on_gpu(flags("--save " + dir + " --save-interval 3"));
  const auto resumed = launch(1, flags("--load " + dir + " --ckpt-step 3"));
  const auto want = parse_losses(gpu.out).train, got = parse_losses(resumed.out).train;
  REQUIRE(want.size() == 6);
  check_close(got, {want.begin() + 3, want.end()}, 1e-4, "lm loss of iterations 4-6");
}
