// A GPT chunk's training step on a CUDA device against the same step on the host: two
// micro-batches in flight with dropout (the same masks on both), two clipped Adam steps. fp32:
// the losses within 1e-4 (relative), the gradient norms within 1e-4, every parameter within
// 1e-3 of the host's (relative to its largest value: GEMM and reduction orders differ); bf16:
// within bf16's rounding. Skipped without a device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/tensor_kernels.hpp"
#include "tests/model/device_step.hpp"
#include "tests/require_cuda_device.hpp"

using namespace mactor;

namespace {

// The largest difference between two fp32 tensors' elements, relative to the host's largest.
double relative_difference(const std::vector<std::byte>& got_bytes, const std::vector<std::byte>& want_bytes) {
  const auto got = test::floats_of_bytes(got_bytes), want = test::floats_of_bytes(want_bytes);
  double worst = 0, scale = 1e-30;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return worst / scale;
}

void check_against_host(const model::gpt_model_config& c, double loss_tolerance, double tensor_tolerance) {
  kernels::cuda::enable_cuda_backend();
  testing::require_cuda_device();
  const auto host = test::train_step(c, tensor::cpu, true);
  const auto gpu = test::train_step(c, {tensor::device_type::cuda, 0}, true);
  CHECK(gpu.num_tokens == host.num_tokens);
  CHECK(gpu.loss_sum == Approx(host.loss_sum).epsilon(loss_tolerance));
  CHECK(gpu.grad_norm == Approx(host.grad_norm).epsilon(loss_tolerance));
  CHECK(gpu.zeros == host.zeros);
  CHECK(gpu.params_norm == Approx(host.params_norm).epsilon(loss_tolerance));
  REQUIRE(gpu.values.size() == host.values.size());
  double worst = 0;
  for (std::size_t i = 0; i < host.values.size(); ++i) {
    INFO("parameter " << i);
    const double d = relative_difference(gpu.values[i], host.values[i]);
    CHECK(d <= tensor_tolerance);
    worst = std::max(worst, d);
  }
  std::printf("loss %.9g (host %.9g), grad norm %.9g (host %.9g), worst parameter difference %.3g\n", gpu.loss_sum,
              host.loss_sum, gpu.grad_norm, host.grad_norm, worst);
}

}  // namespace

TEST_CASE("cuda model: a Llama-style chunk's training step on the GPU matches the host (fp32)", "[cuda][device]") {
  auto c = test::llama_style();
  c.hidden_dropout = 0.1f, c.attention_dropout = 0.1f;
  check_against_host(c, 1e-4, 1e-3);
}

TEST_CASE("cuda model: a GPT-2-style chunk's training step on the GPU matches the host (fp32)", "[cuda][device]") {
  auto c = test::gpt2_style();
  c.hidden_dropout = 0.1f;
  check_against_host(c, 1e-4, 1e-3);
}

TEST_CASE("cuda model: an MoE chunk's training step on the GPU matches the host (fp32)", "[cuda][device]") {
  auto c = test::llama_style();
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 10;
  c.moe.aux_loss_coeff = 1e-2;
  check_against_host(c, 1e-4, 1e-3);
}
