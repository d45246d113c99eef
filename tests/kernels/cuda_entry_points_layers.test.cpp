// The CUDA entry points of context parallelism's ring, fp8 and the Mamba mixer on device tensors
// against the same calls on host tensors holding the same values (tests/kernels/cuda_pairs.hpp):
// the ring's block steps within 1e-4, fp8 rounding and the Mamba copies bit for bit, conv1d and
// the gated norm within 1e-4, the SSD scan (the CPU's on host copies) bit for bit. Skipped
// without a device.
#include <catch2/catch.hpp>

#include <array>
#include <random>
#include <utility>

#include "kernels/causal_conv1d.hpp"
#include "kernels/column_copy.hpp"
#include "kernels/fp8.hpp"
#include "kernels/gated_rmsnorm.hpp"
#include "kernels/ring_attention_block.hpp"
#include "kernels/ssd_scan.hpp"
#include "tests/kernels/cuda_pairs.hpp"

using namespace mactor;
using test::pair;
using test::random_pair;
using test::require_same;
using test::start_on_device;

TEST_CASE("cuda entry points: ring attention's block steps agree with the host's", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(19);
  // cp = 2, this rank 0 (chunks 0 and 3 of 4) against rank 1's block (chunks 1 and 2), and its own.
  kernels::ring_block_dims r;
  r.d.batch = 2, r.d.heads = 4, r.d.groups = 2, r.d.head_dim = 40, r.d.total_heads = 4, r.d.window = 50;
  r.local_length = 150, r.seq_length = 300, r.num_queries = 2, r.num_keys = 2;
  r.queries = {kernels::query_run{0, 0, 75}, kernels::query_run{75, 225, 75}};
  const std::int64_t row_heads = r.rows() * r.d.heads, hd = r.d.head_dim;
  auto qkv = random_pair(r.rows() * r.qkv_width(), rng), dout = random_pair(row_heads * hd, rng);
  auto block = random_pair(r.block_numel(), rng);
  for (const bool own : {false, true}) {
    r.keys = own ? r.queries : std::array<kernels::query_run, 2>{kernels::query_run{0, 75, 75}, {75, 150, 75}};
    auto m = random_pair(row_heads, rng), l = random_pair(row_heads, rng), o = random_pair(row_heads * hd, rng);
    for (auto* t : {&m, &l}) {  // a state that has seen a first block: max near 0, sums >= 1
      for (auto& v : t->host.host<float>()) v = std::abs(v) + (t == &l ? 1.0f : 0.0f);
      cuda::copy(t->device, t->host, cuda::current_stream());
    }
    for (const float p : {0.0f, 0.2f}) {
      const auto clone = [](const pair& t) { return pair{t.host.clone(), t.device.clone()}; };
      auto m1 = clone(m), l1 = clone(l), o1 = clone(o);  // each dropout setting from the same state
      kernels::ring_block_forward(m1.host, l1.host, o1.host, qkv.host, block.host, r, 0.3, p, 9);
      kernels::ring_block_forward(m1.device, l1.device, o1.device, qkv.device, block.device, r, 0.3, p, 9);
      require_same("ring_block_forward m", m1, 1e-5), require_same("ring_block_forward l", l1, 1e-4);
      require_same("ring_block_forward o", o1, 1e-4);
      auto lse = random_pair(row_heads, rng), delta = random_pair(row_heads, rng);
      for (auto& v : lse.host.host<float>()) v = std::abs(v) + 2.0f;
      cuda::copy(lse.device, lse.host, cuda::current_stream());
      auto dq = random_pair(row_heads * hd, rng), dblock = random_pair(r.block_numel(), rng);
      kernels::ring_block_backward(dq.host, dblock.host, dout.host, qkv.host, block.host, lse.host, delta.host, r, 0.3,
                                   p, 9);
      kernels::ring_block_backward(dq.device, dblock.device, dout.device, qkv.device, block.device, lse.device,
                                   delta.device, r, 0.3, p, 9);
      require_same("ring_block_backward dq", dq, 1e-4), require_same("ring_block_backward dblock", dblock, 1e-4);
    }
  }
}

TEST_CASE("cuda entry points: fp8 rounding gives the host's bits per tensor and per block", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(23);
  const int rows = 67, cols = 300;  // ragged blocks at both edges
  auto x = random_pair(std::int64_t(rows) * cols, rng, 600.f);  // past e4m3's 448: saturation
  x.host.host<float>()[5] = 1e-9f, x.host.host<float>()[6] = -0.0f;  // subnormal and signed zero
  cuda::copy(x.device, x.host, cuda::current_stream());
  for (const auto type : {kernels::fp8_type::e4m3, kernels::fp8_type::e5m2}) {
    auto out = random_pair(std::int64_t(rows) * cols, rng);
    const auto [scale, scale_inv] = kernels::current_scale(kernels::amax(x.host), kernels::fp8_max(type), false);
    kernels::round_through_fp8(out.host, x.host, scale * 1.5f, scale_inv, type);
    kernels::round_through_fp8(out.device, x.device, scale * 1.5f, scale_inv, type);
    require_same("round_through_fp8", out, 0);
    for (const auto rule : {kernels::block_scale_rule::e8m0, kernels::block_scale_rule::power_of_two})
      for (const auto& [br, bc] : {std::pair{1, 32}, std::pair{32, 1}, std::pair{128, 128}}) {
        kernels::round_through_fp8_blocks(out.host, x.host, rows, cols, br, bc, rule, type);
        kernels::round_through_fp8_blocks(out.device, x.device, rows, cols, br, bc, rule, type);
        require_same("round_through_fp8_blocks", out, 0);
      }
  }
}

TEST_CASE("cuda entry points: the Mamba mixer's copies, conv1d, gated norm and scan agree with the host", "[cuda][device]") {
  start_on_device();
  std::mt19937 rng(29);
  const int batch = 3, seq = 37, channels = 24, width = 4, n = batch * seq;
  // Columns 5..16 of a [seq, batch] matrix of width 24 into columns 2..13 of a [batch, seq] one of width 20.
  auto src = random_pair(std::int64_t(n) * channels, rng), dst = random_pair(std::int64_t(n) * 20, rng);
  const kernels::column_block from{kernels::row_order::seq_batch, channels, 5}, to{kernels::row_order::batch_seq, 20, 2};
  kernels::copy_columns(dst.host, to, src.host, from, 12, seq, batch);
  kernels::copy_columns(dst.device, to, src.device, from, 12, seq, batch);
  require_same("copy_columns", dst, 0);
  auto x = random_pair(std::int64_t(n) * channels, rng), w = random_pair(channels * width, rng);
  auto bias = random_pair(channels, rng), y = random_pair(std::int64_t(n) * channels, rng);
  kernels::causal_conv1d_forward(y.host, x.host, w.host, bias.host, batch, seq, channels, width, true);
  kernels::causal_conv1d_forward(y.device, x.device, w.device, bias.device, batch, seq, channels, width, true);
  require_same("causal_conv1d_forward", y, 1e-5);
  auto dx = random_pair(std::int64_t(n) * channels, rng), dw = random_pair(channels * width, rng);
  auto dbias = random_pair(channels, rng);
  kernels::causal_conv1d_backward(dx.host, dw.host, dbias.host, y.host, x.host, w.host, bias.host, batch, seq, channels,
                                  width, true);
  kernels::causal_conv1d_backward(dx.device, dw.device, dbias.device, y.device, x.device, w.device, bias.device, batch,
                                  seq, channels, width, true);
  require_same("causal_conv1d_backward dx", dx, 1e-5), require_same("causal_conv1d_backward dw", dw, 1e-4);
  require_same("causal_conv1d_backward dbias", dbias, 1e-4);
  const int groups = 3, d = channels;
  auto z = random_pair(std::int64_t(n) * d, rng), gw = random_pair(d, rng), rstd = random_pair(n * groups, rng);
  kernels::gated_rmsnorm_forward(y.host, rstd.host, x.host, z.host, gw.host, n, d, d / groups, 1e-5);
  kernels::gated_rmsnorm_forward(y.device, rstd.device, x.device, z.device, gw.device, n, d, d / groups, 1e-5);
  require_same("gated_rmsnorm_forward", y, 1e-5), require_same("gated_rmsnorm_forward rstd", rstd, 1e-5);
  auto dz = random_pair(std::int64_t(n) * d, rng), dgw = random_pair(d, rng);
  kernels::gated_rmsnorm_backward(dx.host, dz.host, dgw.host, y.host, x.host, z.host, gw.host, rstd.host, n, d, d / groups);
  kernels::gated_rmsnorm_backward(dx.device, dz.device, dgw.device, y.device, x.device, z.device, gw.device, rstd.device,
                                  n, d, d / groups);
  require_same("gated_rmsnorm_backward dx", dx, 1e-4), require_same("gated_rmsnorm_backward dz", dz, 1e-4);
  require_same("gated_rmsnorm_backward dweight", dgw, 1e-4);
  // The scan runs the CPU's kernel on host copies: the host's bits.
  const kernels::ssd_shape s{.batch = 2, .seq = 40, .heads = 4, .head_dim = 8, .groups = 2, .state = 8, .chunk = 16};
  const std::int64_t rows = std::int64_t(s.batch) * s.seq, xn = rows * s.heads * s.head_dim, bn = rows * s.groups * s.state;
  auto sx = random_pair(xn, rng), dt = random_pair(rows * s.heads, rng), A_log = random_pair(s.heads, rng);
  auto B = random_pair(bn, rng), C = random_pair(bn, rng), D = random_pair(s.heads, rng), dt_bias = random_pair(s.heads, rng);
  auto sy = random_pair(xn, rng), states = random_pair(s.states_size(), rng);
  kernels::ssd_scan_forward(sy.host, states.host, sx.host, dt.host, A_log.host, B.host, C.host, D.host, dt_bias.host, s);
  kernels::ssd_scan_forward(sy.device, states.device, sx.device, dt.device, A_log.device, B.device, C.device, D.device,
                            dt_bias.device, s);
  require_same("ssd_scan_forward", sy, 0), require_same("ssd_scan_forward states", states, 0);
}
