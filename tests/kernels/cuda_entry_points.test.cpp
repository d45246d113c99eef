// The kernels' tensor entry points on mactor tensors in CUDA memory (kernels/cuda/tensor_kernels):
// each runs on device tensors and on host tensors holding the same values, and the results must
// agree. The device tests are skipped without a device; the first case runs everywhere.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/adam.hpp"
#include "kernels/attention.hpp"
#include "kernels/bias.hpp"
#include "kernels/convert.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/tensor_kernels.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/fp8.hpp"
#include "kernels/gelu.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/mla_rope.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/reductions.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sgd.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/tensor_ops.hpp"
#include "tensor/cuda/copy.hpp"
#include "tensor/cuda/current_stream.hpp"
#include "tensor/cuda/device.hpp"
#include "tests/kernels/cuda_pairs.hpp"

using namespace mactor;
using test::gpu;
using test::pair;
using test::random_pair;
using test::require_same;
using test::start_on_device;

namespace {

// Ids on the device, as four bytes each in an fp32 tensor.
tensor::tensor device_ids(const std::vector<std::int32_t>& ids) {
  tensor::tensor d({std::int64_t(ids.size())}, tensor::dtype::float32, tensor::memory_kind::other, gpu);
  cuda::copy(d, tensor::const_tensor_view{ids.data(), {std::int64_t(ids.size())}, tensor::dtype::float32},
             cuda::current_stream());
  return d;
}

// The pair in bf16 (the values rounded once), on both sides.
pair to_bf16(const pair& p) {
  pair b{tensor::tensor(p.host.shape(), tensor::dtype::bfloat16, tensor::memory_kind::other),
         tensor::tensor(p.host.shape(), tensor::dtype::bfloat16, tensor::memory_kind::other, gpu)};
  kernels::convert(b.host, p.host);
  cuda::copy(b.device, b.host, cuda::current_stream());
  return b;
}

// A bf16 pair widened to fp32 on both sides, for require_same.
pair widened(const pair& b) {
  pair p{tensor::tensor(b.host.shape(), tensor::dtype::float32, tensor::memory_kind::other),
         tensor::tensor(b.host.shape(), tensor::dtype::float32, tensor::memory_kind::other, gpu)};
  kernels::convert(p.host, b.host);
  const auto back = cuda::to_host(b.device, tensor::memory_kind::other, cuda::current_stream());
  tensor::tensor host_copy(b.host.shape(), tensor::dtype::float32, tensor::memory_kind::other);
  kernels::convert(host_copy, back);
  cuda::copy(p.device, host_copy, cuda::current_stream());
  return p;
}


}  // namespace

TEST_CASE("cuda backend: a device tensor where there is no device names it", "[cuda][detect]") {
  kernels::cuda::enable_cuda_backend();
  const int missing = cuda::device_count();
  CHECK_THROWS_WITH(tensor::tensor({4}, tensor::dtype::float32, tensor::memory_kind::other,
                                   {tensor::device_type::cuda, missing}),
                    Catch::Contains("no CUDA device " + std::to_string(missing)));
}

TEST_CASE("cuda entry points: tensor ops linears norms and activations agree with the host", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(7);
  const int rows = 33, in = 40, out = 24;
  auto x = random_pair(rows * in, rng), w = random_pair(out * in, rng), y = random_pair(rows * out, rng);
  for (auto* t : {&y.host, &y.device}) kernels::fill_zero(*t);
  kernels::linear_forward(x.host, w.host, y.host, rows, in, out);
  kernels::linear_forward(x.device, w.device, y.device, rows, in, out);
  require_same("linear_forward", y, 1e-5);
  auto dx = random_pair(rows * in, rng), dw = random_pair(out * in, rng);
  kernels::linear_backward_input(y.host, w.host, dx.host, rows, in, out);
  kernels::linear_backward_input(y.device, w.device, dx.device, rows, in, out);
  kernels::linear_backward_weight(y.host, x.host, dw.host, rows, in, out);
  kernels::linear_backward_weight(y.device, x.device, dw.device, rows, in, out);
  require_same("linear_backward_input", dx, 1e-4), require_same("linear_backward_weight", dw, 1e-4);

  auto gamma = random_pair(in, rng), rstd = random_pair(rows, rng), mean = random_pair(rows, rng);
  auto normed = random_pair(rows * in, rng), dgamma = random_pair(in, rng);
  kernels::rmsnorm_forward(normed.host, rstd.host, x.host, gamma.host, rows, in, 1e-5, false);
  kernels::rmsnorm_forward(normed.device, rstd.device, x.device, gamma.device, rows, in, 1e-5, false);
  require_same("rmsnorm_forward", normed, 1e-5), require_same("rmsnorm rstd", rstd, 1e-5);
  kernels::rmsnorm_backward(dx.host, dgamma.host, normed.host, x.host, gamma.host, rstd.host, rows, in, false, false);
  kernels::rmsnorm_backward(dx.device, dgamma.device, normed.device, x.device, gamma.device, rstd.device, rows, in,
                            false, false);
  require_same("rmsnorm dx", dx, 1e-4), require_same("rmsnorm dgamma", dgamma, 1e-4);
  kernels::layernorm_forward(normed.host, mean.host, rstd.host, x.host, gamma.host, {}, rows, in, 1e-5, true);
  kernels::layernorm_forward(normed.device, mean.device, rstd.device, x.device, gamma.device, {}, rows, in, 1e-5, true);
  require_same("layernorm_forward", normed, 1e-5), require_same("layernorm mean", mean, 1e-5);

  auto act = random_pair(rows * in, rng);
  kernels::gelu_forward(act.host, x.host, rows * in, true);
  kernels::gelu_forward(act.device, x.device, rows * in, true);
  require_same("gelu_forward", act, 1e-5);
  kernels::swiglu_forward(act.host, x.host, rows, in / 2);
  kernels::swiglu_forward(act.device, x.device, rows, in / 2);
  require_same("swiglu_forward", act, 1e-5);
  kernels::scale(act.host, 0.5), kernels::scale(act.device, 0.5);
  kernels::add(act.host, x.host), kernels::add(act.device, x.device);
  require_same("scale and add", act, 1e-6);
  kernels::copy(act.host, x.host);
  kernels::copy(act.device, x.device);
  require_same("copy", act, 0);
  kernels::bias_add(act.host, gamma.host, rows, in), kernels::bias_add(act.device, gamma.device, rows, in);
  kernels::bias_backward(gamma.host, act.host, rows, in), kernels::bias_backward(gamma.device, act.device, rows, in);
  require_same("bias_add", act, 1e-6), require_same("bias_backward", gamma, 1e-5);
}

TEST_CASE("cuda entry points: dropout attention rope embedding and the loss agree with the host", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(8);
  const int n = 16, h = 24;
  auto x = random_pair(n * h, rng), residual = random_pair(n * h, rng), bias = random_pair(h, rng);
  auto out = random_pair(n * h, rng);
  kernels::bias_dropout_add(out.host, residual.host, x.host, bias.host, n, h, 0.25f, 5, 100);
  kernels::bias_dropout_add(out.device, residual.device, x.device, bias.device, n, h, 0.25f, 5, 100);
  require_same("bias_dropout_add", out, 0);  // the same masks and the same roundings: the same bits
  kernels::dropout_apply(out.host, x.host, n * h, 0.5f, 9, 0);
  kernels::dropout_apply(out.device, x.device, n * h, 0.5f, 9, 0);
  require_same("dropout_apply", out, 0);

  kernels::attention_dims d;
  d.seq = 12, d.batch = 2, d.heads = 4, d.groups = 2, d.head_dim = 8, d.total_heads = 4;
  const std::int64_t rows = std::int64_t(d.seq) * d.batch;
  auto qkv = random_pair(rows * d.qkv_width(), rng), context = random_pair(rows * d.heads * d.head_dim, rng);
  auto probs = random_pair(std::int64_t(d.batch) * d.heads * d.seq * d.seq, rng);
  auto dqkv = random_pair(qkv.host.numel(), rng);
  kernels::attention_forward(context.host, probs.host, qkv.host, d, 0.35, 0.1f, 3);
  kernels::attention_forward(context.device, probs.device, qkv.device, d, 0.35, 0.1f, 3);
  require_same("attention context", context, 1e-5), require_same("attention probs", probs, 1e-5);
  kernels::attention_backward(dqkv.host, context.host, qkv.host, probs.host, d, 0.35, 0.1f, 3);
  kernels::attention_backward(dqkv.device, context.device, qkv.device, probs.device, d, 0.35, 0.1f, 3);
  require_same("attention dqkv", dqkv, 1e-4);

  auto cos = random_pair(d.seq * d.head_dim / 2, rng), sin = random_pair(d.seq * d.head_dim / 2, rng);
  // The queries and the key of each group rotate (the values do not), as the attention layer does.
  kernels::rope_apply(qkv.host, cos.host, sin.host, d.seq, d.batch, d.groups, d.heads / d.groups + 1, d.head_dim,
                      d.head_dim, d.qkv_width(), d.qkv_width() / d.groups, false, false);
  kernels::rope_apply(qkv.device, cos.device, sin.device, d.seq, d.batch, d.groups, d.heads / d.groups + 1,
                      d.head_dim, d.head_dim, d.qkv_width(), d.qkv_width() / d.groups, false, false);
  require_same("rope_apply", qkv, 1e-6);

  const int vocab = 50, tokens = 20, hidden = 16;
  std::vector<std::int32_t> ids(tokens);
  for (int i = 0; i < tokens; ++i) ids[i] = (i * 17) % vocab;
  const auto ids_on_device = device_ids(ids);
  const auto* device_id_ptr = static_cast<const std::int32_t*>(ids_on_device.data());
  auto table = random_pair(vocab * hidden, rng), embedded = random_pair(tokens * hidden, rng);
  kernels::embedding_forward(embedded.host, table.host, ids.data(), tokens, hidden, 0, vocab);
  kernels::embedding_forward(embedded.device, table.device, device_id_ptr, tokens, hidden, 0, vocab);
  require_same("embedding_forward", embedded, 0);
  // The MoE dispatch's rows: host indices, device tensors.
  const std::vector<std::int64_t> picks = {4, 0, 4, 19, 7};
  auto gathered = random_pair(std::int64_t(picks.size()) * hidden, rng);
  kernels::gather_rows(gathered.host, embedded.host, picks, hidden);
  kernels::gather_rows(gathered.device, embedded.device, picks, hidden);
  require_same("gather_rows", gathered, 0);
  kernels::scatter_add_rows(embedded.host, gathered.host, picks, hidden);
  kernels::scatter_add_rows(embedded.device, gathered.device, picks, hidden);
  require_same("scatter_add_rows", embedded, 0);  // added in the same order: the same bits

  auto logits = random_pair(tokens * vocab, rng, 4.f), row_max = random_pair(tokens, rng);
  auto sum_exp = random_pair(tokens, rng), target = random_pair(tokens, rng), loss = random_pair(tokens, rng);
  auto grad_scale = random_pair(tokens, rng);
  for (auto side : {&pair::host, &pair::device}) {
    const std::int32_t* labels = side == &pair::host ? ids.data() : device_id_ptr;
    kernels::cross_entropy_row_max(row_max.*side, logits.*side, tokens, vocab);
    kernels::cross_entropy_shard_sums(sum_exp.*side, target.*side, logits.*side, row_max.*side, labels, tokens, vocab, 0);
    kernels::cross_entropy_loss(loss.*side, sum_exp.*side, row_max.*side, target.*side, tokens);
    kernels::cross_entropy_backward(logits.*side, sum_exp.*side, labels, grad_scale.*side, tokens, vocab, 0);
  }
  require_same("cross-entropy loss", loss, 1e-5), require_same("cross-entropy dlogits", logits, 1e-5);
}

TEST_CASE("cuda entry points: bf16 tensors are computed in fp32 and rounded once as on the host", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(9);
  const int n = 24, h = 40;
  auto x = to_bf16(random_pair(n * h, rng, 2.f)), gamma = to_bf16(random_pair(h, rng));
  auto y = to_bf16(random_pair(n * h, rng)), residual = to_bf16(random_pair(n * h, rng));
  tensor::tensor rstd_host({n}, tensor::dtype::float32, tensor::memory_kind::other);
  tensor::tensor rstd_device({n}, tensor::dtype::float32, tensor::memory_kind::other, gpu);
  kernels::rmsnorm_forward(y.host, rstd_host, x.host, gamma.host, n, h, 1e-5, false);
  kernels::rmsnorm_forward(y.device, rstd_device, x.device, gamma.device, n, h, 1e-5, false);
  // One bf16 rounding of values computed in fp32 in another order: at most one ulp (2^-7) apart.
  require_same("bf16 rmsnorm", widened(y), 1.0 / 128);
  kernels::gelu_forward(y.host, x.host, n * h, false);
  kernels::gelu_forward(y.device, x.device, n * h, false);
  require_same("bf16 gelu", widened(y), 1.0 / 128);
  kernels::bias_dropout_add(y.host, residual.host, x.host, {}, n, h, 0.2f, 11, 0);
  kernels::bias_dropout_add(y.device, residual.device, x.device, {}, n, h, 0.2f, 11, 0);
  require_same("bf16 bias_dropout_add", widened(y), 0);  // element-wise, the same roundings: the same bits
  auto w = to_bf16(random_pair(h * h, rng)), out = to_bf16(random_pair(n * h, rng));
  kernels::linear_forward(x.host, w.host, out.host, n, h, h);
  kernels::linear_forward(x.device, w.device, out.device, n, h, h);
  require_same("bf16 linear (cuBLASLt bf16)", widened(out), 1.0 / 128);
  // fp32 <-> bf16 on the device, and an fp32 tensor rounded through bf16 in place.
  auto wide = widened(out);
  kernels::convert(out.host, wide.host), kernels::convert(out.device, wide.device);
  require_same("convert fp32 to bf16", widened(out), 0);
  kernels::round_through(wide.host, tensor::dtype::float16), kernels::round_through(wide.device, tensor::dtype::float16);
  require_same("round_through fp16", wide, 0);
  // A 16-bit model's weight gradient: bf16 operands accumulated into fp32 main grads.
  auto main_grad = random_pair(h * h, rng);
  kernels::linear_backward_weight(out.host, x.host, main_grad.host, n, h, h);
  kernels::linear_backward_weight(out.device, x.device, main_grad.device, n, h, h);
  require_same("bf16 weight gradient into fp32", main_grad, 1e-4);
}

TEST_CASE("cuda entry points: Adam steps and the optimizer statistics agree with the host", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(11);
  const std::int64_t n = 300001;  // several of the Adam kernel's chunks and a ragged end
  auto value = random_pair(n, rng), grad = random_pair(n, rng, 0.01f);
  auto m = random_pair(n, rng), v = random_pair(n, rng);
  for (auto* t : {&m.host, &m.device, &v.host, &v.device}) kernels::fill_zero(*t);
  kernels::adam_hyperparameters h;
  h.lr = 3e-3, h.weight_decay = 0.1, h.beta2 = 0.95;
  for (h.step = 1; h.step <= 3; ++h.step) {
    kernels::adam_step(value.host, grad.host, m.host, v.host, h);
    kernels::adam_step(value.device, grad.device, m.device, v.device, h);
  }
  // The same roundings in the same order: the very same bits.
  require_same("adam_step values", value, 0), require_same("adam_step exp_avg", m, 0);
  require_same("adam_step exp_avg_sq", v, 0);
  // The device sums in its own order: the same value to double's rounding.
  const double host_sum = kernels::sum_of_squares(grad.host), device_sum = kernels::sum_of_squares(grad.device);
  CHECK(device_sum == Approx(host_sum).epsilon(1e-12));
  for (std::int64_t i = 0; i < n; i += 7) grad.host.host<float>()[std::size_t(i)] = 0.0f;
  cuda::copy(grad.device, grad.host, cuda::current_stream());
  CHECK(kernels::count_zeros(grad.device) == kernels::count_zeros(grad.host));
  CHECK(kernels::count_zeros(grad.host) >= double((n + 6) / 7));
}

TEST_CASE("cuda entry points: multi-latent attention's rotary embedding gives the host's bits", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(13);
  const int seq = 9, batch = 3, heads = 5, rot_dim = 64, head_stride = 96, offset = 32;
  const std::int64_t row_stride = std::int64_t(heads) * head_stride;
  auto x = random_pair(seq * batch * row_stride, rng);
  auto cos = random_pair(seq * rot_dim / 2, rng), sin = random_pair(seq * rot_dim / 2, rng);
  for (const bool inverse : {false, true}) {
    kernels::mla_rope_apply(x.host, cos.host, sin.host, seq, batch, heads, row_stride, head_stride, offset, rot_dim,
                            inverse);
    kernels::mla_rope_apply(x.device, cos.device, sin.device, seq, batch, heads, row_stride, head_stride, offset,
                            rot_dim, inverse);
    require_same(inverse ? "mla_rope_apply inverse" : "mla_rope_apply", x, 0);
  }
}

TEST_CASE("cuda entry points: SGD steps with momentum give the host's bits and amax agrees", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(17);
  const std::int64_t n = 100003;
  auto value = random_pair(n, rng), grad = random_pair(n, rng, 0.01f), buf = random_pair(n, rng);
  kernels::sgd_hyperparameters h;
  h.lr = 0.05, h.weight_decay = 0.1, h.momentum = 0.9;
  for (int step = 0; step < 3; ++step) {
    h.first_step = step == 0, h.nesterov = step == 2;
    kernels::sgd_step(value.host, grad.host, buf.host, h);
    kernels::sgd_step(value.device, grad.device, buf.device, h);
  }
  require_same("sgd_step values", value, 0), require_same("sgd_step momentum buffer", buf, 0);
  grad.host.host<float>()[77] = -3.5f;
  cuda::copy(grad.device, grad.host, cuda::current_stream());
  CHECK(kernels::amax(grad.device) == kernels::amax(grad.host));
  CHECK(kernels::amax(grad.host) == 3.5f);
}
