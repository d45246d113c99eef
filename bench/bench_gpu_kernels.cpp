// Speed of the CUDA kernels (kernels/cuda/) on one device: GEMM throughput through cuBLASLt and
// the memory bandwidth of the hand-written kernels at the sizes of a 1-3B GPT layer (8192 tokens,
// hidden 4096). Prints one table row per kernel; without a device it says so and exits 3.
//
//   build/bin/bench_gpu_kernels [--reps N]
//
// Times are CUDA-event times per call, averaged over N calls after two warm-up calls.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/activations.hpp"
#include "kernels/cuda/adam.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/dropout.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "tensor/cuda/copy.hpp"
#include "tensor/cuda/device.hpp"
#include "tensor/cuda/device_allocator.hpp"
#include "tensor/cuda/stream.hpp"

namespace {

using mactor::cuda::device_buffer;
namespace kc = mactor::kernels::cuda;
namespace tensor = mactor::tensor;

int reps = 10;

// Milliseconds per call of f on stream s.
double time_ms(mactor::cuda::stream_handle s, const std::function<void()>& f) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  f(), f();
  cudaEventRecord(start, s);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(stop, s);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start), cudaEventDestroy(stop);
  mactor::cuda::detail::check(cudaGetLastError(), "bench");
  return ms / reps;
}

// A device buffer of `count` elements of `type` filled with values in [-1, 1) (bf16 as its
// bit pattern's top half of an fp32).
device_buffer filled(std::int64_t count, tensor::dtype type, mactor::cuda::stream_handle s) {
  device_buffer d({count}, type);
  std::vector<float> host(count);
  std::uint32_t state = 12345;
  for (auto& v : host) v = float((state = state * 1664525u + 1013904223u) >> 8) / float(1 << 23) - 1.f;
  if (type == tensor::dtype::bfloat16) {
    std::vector<tensor::bfloat16> half(count);
    for (std::int64_t i = 0; i < count; ++i) half[i] = tensor::to_bfloat16(host[i]);
    mactor::cuda::copy(d, tensor::view_of(std::span<const tensor::bfloat16>(half)), s);
    cudaStreamSynchronize(s);
    return d;
  }
  mactor::cuda::copy(d, tensor::view_of(std::span<const float>(host)), s);
  cudaStreamSynchronize(s);
  return d;
}

void row(const char* kernel, const std::string& shape, double ms, double flops, double bytes) {
  std::printf("| %-22s | %-26s | %9.3f | %9.1f | %8.0f |\n", kernel, shape.c_str(), ms,
              flops > 0 ? flops / ms / 1e9 : 0.0, bytes > 0 ? bytes / ms / 1e6 : 0.0);
}

void bench_gemms(mactor::cuda::stream_handle s) {
  struct shape { const char* what; bool ta, tb; int m, n, k; };
  const shape shapes[] = {{"square", false, false, 4096, 4096, 4096},
                          {"fc1 fwd x.w^T", false, true, 8192, 16384, 4096},
                          {"fc2 dgrad dy.w", false, false, 8192, 4096, 16384},
                          {"fc1 wgrad dy^T.x", true, false, 16384, 4096, 8192}};
  for (const auto& g : shapes) {
    const std::string dims = std::string(g.what) + " " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
                             std::to_string(g.k);
    const double flops = 2.0 * g.m * g.n * g.k;
    const int lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
    {
      auto a = filled(std::int64_t(g.m) * g.k, tensor::dtype::bfloat16, s);
      auto b = filled(std::int64_t(g.k) * g.n, tensor::dtype::bfloat16, s);
      device_buffer c({std::int64_t(g.m) * g.n}, tensor::dtype::bfloat16);
      row("gemm bf16", dims, time_ms(s, [&] {
            kc::gemm(g.ta, g.tb, g.m, g.n, g.k, 1.f, a.as<tensor::bfloat16>(), lda, b.as<tensor::bfloat16>(), ldb,
                     0.f, c.as<tensor::bfloat16>(), g.n, s);
          }), flops, 0);
    }
    if (g.k > 4096) continue;  // fp32 is slow; one shape tells its rate
    auto a = filled(std::int64_t(g.m) * g.k, tensor::dtype::float32, s);
    auto b = filled(std::int64_t(g.k) * g.n, tensor::dtype::float32, s);
    device_buffer c({std::int64_t(g.m) * g.n}, tensor::dtype::float32);
    row("gemm fp32", dims, time_ms(s, [&] {
          kc::gemm(g.ta, g.tb, g.m, g.n, g.k, 1.f, a.as<float>(), lda, b.as<float>(), ldb, 0.f, c.as<float>(), g.n, s);
        }), flops, 0);
  }
}

void bench_row_kernels(mactor::cuda::stream_handle s) {
  const int n = 8192, h = 4096, f = 11008;
  const double nh = double(n) * h * 4;  // bytes of one [n, h] fp32 tensor
  const std::string dims = std::to_string(n) + "x" + std::to_string(h);
  const auto f32 = tensor::dtype::float32;
  const std::int64_t count = std::int64_t(n) * h;
  auto x = filled(count, f32, s), dy = filled(count, f32, s), gamma = filled(h, f32, s), beta = filled(h, f32, s);
  device_buffer y({count}, f32), dx({count}, f32), mean({n}, f32), rstd({n}, f32), dgamma({h}, f32), dbeta({h}, f32);
  float *X = x.as<float>(), *Y = y.as<float>(), *G = gamma.as<float>(), *R = rstd.as<float>();
  row("rmsnorm fwd", dims, time_ms(s, [&] { kc::rmsnorm_forward(Y, R, X, G, n, h, 1e-5f, false, s); }), 0, 2 * nh);
  row("rmsnorm bwd", dims, time_ms(s, [&] {
        kc::rmsnorm_backward(dx.as<float>(), dgamma.as<float>(), dy.as<float>(), X, G, R, n, h, false, false, s);
      }), 0, 5 * nh);
  row("layernorm fwd", dims, time_ms(s, [&] {
        kc::layernorm_forward(Y, mean.as<float>(), R, X, G, beta.as<float>(), n, h, 1e-5f, false, s);
      }), 0, 2 * nh);
  row("layernorm bwd", dims, time_ms(s, [&] {
        kc::layernorm_backward(dx.as<float>(), dgamma.as<float>(), dbeta.as<float>(), dy.as<float>(), X, G,
                               mean.as<float>(), R, n, h, false, false, s);
      }), 0, 6 * nh);
  row("gelu fwd", dims, time_ms(s, [&] { kc::gelu_forward(Y, X, std::int64_t(n) * h, false, s); }), 0, 2 * nh);
  auto gate_up = filled(std::int64_t(n) * 2 * f, tensor::dtype::float32, s);
  device_buffer act({std::int64_t(n) * f}, tensor::dtype::float32);
  row("swiglu fwd", std::to_string(n) + "x2x" + std::to_string(f),
      time_ms(s, [&] { kc::swiglu_forward(act.as<float>(), gate_up.as<float>(), n, f, s); }), 0, 3.0 * n * f * 4);
}

void bench_loss_and_adam(mactor::cuda::stream_handle s) {
  const int n = 4096, v = 50304;
  auto logits = filled(std::int64_t(n) * v, tensor::dtype::float32, s);
  std::vector<std::int32_t> host_labels(n);
  for (int i = 0; i < n; ++i) host_labels[i] = (i * 7919) % v;
  device_buffer labels({n}, tensor::dtype::float32);  // int32s, 4 bytes each
  mactor::cuda::copy(labels, tensor::const_tensor_view{host_labels.data(), {n}, tensor::dtype::float32}, s);
  device_buffer row_max({n}, tensor::dtype::float32);
  row("cross-entropy row max", std::to_string(n) + "x" + std::to_string(v),
      time_ms(s, [&] { kc::cross_entropy_row_max(row_max.as<float>(), logits.as<float>(), n, v, s); }), 0,
      double(n) * v * 4);
  const std::int64_t count = std::int64_t(1) << 26;
  auto value = filled(count, tensor::dtype::float32, s), grad = filled(count, tensor::dtype::float32, s);
  device_buffer m({count}, tensor::dtype::float32), sq({count}, tensor::dtype::float32);
  mactor::cuda::zero(m, s), mactor::cuda::zero(sq, s);
  const kc::adam_tensor t{value.as<float>(), grad.as<float>(), m.as<float>(), sq.as<float>(), count};
  kc::adam_hyperparameters h{1e-4, 0.1, 0.9, 0.95, 1e-8, true, 1};
  row("adam (one tensor)", "64M params", time_ms(s, [&] { kc::adam_step({&t, 1}, h, s); }), 0, 7.0 * count * 4);
}

// The fp32 attention core (the exact path, not a fused one) at sequence 2048, and dropout at a
// layer's [8192, 4096].
void bench_attention_and_dropout(mactor::cuda::stream_handle s) {
  mactor::kernels::attention_dims d;
  d.seq = 2048, d.batch = 1, d.heads = 16, d.groups = 4, d.head_dim = 128, d.total_heads = 16;
  const std::int64_t rows = std::int64_t(d.seq) * d.batch;
  const auto f32 = tensor::dtype::float32;
  auto qkv = filled(rows * d.qkv_width(), f32, s), dout = filled(rows * d.heads * d.head_dim, f32, s);
  device_buffer out({rows * d.heads * d.head_dim}, f32), dqkv({rows * d.qkv_width()}, f32);
  device_buffer probs({std::int64_t(d.batch) * d.heads * d.seq * d.seq}, f32);
  device_buffer scratch({kc::attention_backward_scratch(d)}, f32);
  const float scale = 0.088f;
  const std::string shape = "s2048 h16 g4 d128";
  // Causal: half of the score matrix, two GEMMs forward, four backward.
  const double forward_flops = 2.0 * 2 * d.heads * double(d.seq) * d.seq / 2 * d.head_dim;
  row("attention fwd fp32", shape, time_ms(s, [&] {
        kc::attention_forward(out.as<float>(), probs.as<float>(), qkv.as<float>(), d, scale, 0.1f, 7, nullptr,
                              nullptr, s);
      }), forward_flops, 0);
  row("attention bwd fp32", shape, time_ms(s, [&] {
        kc::attention_backward(dqkv.as<float>(), dout.as<float>(), qkv.as<float>(), probs.as<float>(), d, scale, 0.1f,
                               7, scratch.as<float>(), nullptr, nullptr, nullptr, nullptr, s);
      }), 2 * forward_flops, 0);
  const int n = 8192, h = 4096;
  const std::int64_t count = std::int64_t(n) * h;
  auto x = filled(count, f32, s), residual = filled(count, f32, s), bias = filled(h, f32, s);
  device_buffer y({count}, f32);
  const std::string dims = std::to_string(n) + "x" + std::to_string(h);
  row("dropout", dims, time_ms(s, [&] { kc::dropout_apply(y.as<float>(), x.as<float>(), count, 0.1f, 3, 0, s); }), 0,
      2.0 * count * 4);
  row("bias-dropout-add", dims, time_ms(s, [&] {
        kc::bias_dropout_add(y.as<float>(), residual.as<float>(), x.as<float>(), bias.as<float>(), n, h, 0.1f, 3, 0, s);
      }), 0, 3.0 * count * 4);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::stoi(argv[i + 1]);
  if (mactor::cuda::device_count() == 0) {
    std::printf("bench_gpu_kernels: no CUDA device (%s)\n", mactor::cuda::no_device_reason().c_str());
    return 3;
  }
  std::printf("device 0: %s, %d calls per row\n\n", mactor::cuda::describe_device(0).c_str(), reps);
  std::printf("| %-22s | %-26s | %9s | %9s | %8s |\n", "kernel", "shape", "ms", "TFLOP/s", "GB/s");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(24, '-').c_str(), std::string(28, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str(), std::string(10, '-').c_str());
  mactor::cuda::stream s;
  bench_gemms(s);
  bench_row_kernels(s);
  bench_loss_and_adam(s);
  bench_attention_and_dropout(s);
  s.synchronize();
  return 0;
}
