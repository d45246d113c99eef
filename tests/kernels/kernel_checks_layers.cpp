// The kernel checks of the attention core, dropout, squared ReLU and the MoE row operations:
// the backend in fp32 against the CPU kernel in double on the same random inputs. Dropout's
// masks come from one generator on every backend, so the dropped elements must be the very same.
#include "tests/kernels/kernel_check_support.hpp"
#include "tests/kernels/kernel_checks.hpp"

#include <cmath>
#include <tuple>

#include "kernels/attention.hpp"
#include "kernels/bias.hpp"
#include "kernels/dropout.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/squared_relu.hpp"

namespace mactor::testing {

namespace {

struct attention_case {
  const char* what;
  kernels::attention_dims dims;
  float dropout_p;
  bool sink, documents;
};

kernels::attention_dims dims_of(int seq, int batch, int heads, int groups, int head_dim) {
  kernels::attention_dims d;
  d.seq = seq, d.batch = batch, d.heads = heads, d.groups = groups, d.head_dim = head_dim, d.total_heads = heads;
  return d;
}

// Every case's shape: odd sizes; heads per thread block past one (head_dim 160) and keys past
// one shared-memory tile (1100); context parallelism's two query runs against 16 keys.
std::vector<attention_case> attention_cases() {
  std::vector<attention_case> cases = {
      {"plain", dims_of(7, 2, 2, 2, 8), 0.f, false, false},
      {"grouped, dropout, sink", dims_of(33, 1, 4, 2, 16), 0.1f, true, false},
      {"window and documents", dims_of(19, 2, 2, 1, 12), 0.f, false, true},
      {"long rows, wide heads", dims_of(1100, 1, 1, 1, 160), 0.05f, true, false},
  };
  cases[2].dims.window = 5;
  auto cp = dims_of(8, 2, 2, 1, 8);
  cp.kv_seq = 16, cp.head_offset = 2, cp.total_heads = 4, cp.num_runs = 2;
  cp.runs = {kernels::query_run{0, 0, 4}, kernels::query_run{4, 12, 4}};
  cases.push_back({"context-parallel runs", cp, 0.2f, true, true});
  return cases;
}

// Documents of 7 tokens: the first key each position sees.
ids document_starts(const kernels::attention_dims& d) {
  ids starts(std::size_t(d.batch) * d.keys());
  for (int b = 0; b < d.batch; ++b)
    for (int g = 0; g < d.keys(); ++g) starts[std::size_t(b) * d.keys() + g] = g / 7 * 7;
  return starts;
}

}  // namespace

void check_attention(kernel_backend& backend) {
  std::mt19937 rng(81);
  for (const auto& c : attention_cases()) {
    INFO(backend.name() << " attention: " << c.what);
    const auto& d = c.dims;
    const std::size_t rows = std::size_t(d.seq) * d.batch, kv_rows = std::size_t(d.keys()) * d.batch;
    const bool cp = d.kv_seq > 0;
    attention_io io;
    io.dims = d, io.scale = 1.f / std::sqrt(float(d.head_dim)), io.dropout_p = c.dropout_p, io.dropout_stream = 99;
    io.qkv = random_floats(rows * d.qkv_width(), rng), io.dout = random_floats(rows * d.heads * d.head_dim, rng);
    if (cp) io.kv = random_floats(kv_rows * d.qkv_width(), rng), io.dkv = random_floats(io.kv.size(), rng);
    if (c.sink) io.sink = random_floats(d.heads, rng, 2.f), io.dsink = random_floats(d.heads, rng);
    if (c.documents) io.document_start = document_starts(d);
    io.out = random_floats(rows * d.heads * d.head_dim, rng);
    io.probs = floats(std::size_t(d.batch) * d.heads * d.seq * d.keys());
    io.dqkv = random_floats(io.qkv.size(), rng);  // the key and value parts stay as they are under CP

    auto dims = d;
    dims.document_start = c.documents ? io.document_start.data() : nullptr;
    const doubles qkv = widen(io.qkv), kv = widen(io.kv), sink = widen(io.sink), dout = widen(io.dout);
    doubles out(io.out.size()), probs(io.probs.size()), dqkv = widen(io.dqkv), dkv = widen(io.dkv),
        dsink = widen(io.dsink);
    const double* sink_or_null = c.sink ? sink.data() : nullptr;
    const double* kv_or_null = cp ? kv.data() : nullptr;
    kernels::attention_forward<double>(out.data(), probs.data(), qkv.data(), dims, io.scale, io.dropout_p,
                                       io.dropout_stream, sink_or_null, kv_or_null);
    kernels::attention_backward<double>(dqkv.data(), dout.data(), qkv.data(), probs.data(), dims, io.scale,
                                        io.dropout_p, io.dropout_stream, sink_or_null,
                                        c.sink ? dsink.data() : nullptr, kv_or_null, cp ? dkv.data() : nullptr);
    backend.attention(io);
    require_close("out", io.out, out, 2e-5), require_close("probs", io.probs, probs, 1e-5);
    require_close("dqkv", io.dqkv, dqkv, 1e-4), require_close("dkv", io.dkv, dkv, 1e-4);
    require_close("dsink", io.dsink, dsink, 1e-4);
  }
}

void check_dropout(kernel_backend& backend) {
  std::mt19937 rng(91);
  for (const float p : {0.f, 0.1f, 0.5f})
    for (const std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(100003)}) {
      INFO(backend.name() << " dropout p=" << p << " n=" << n);
      const floats x = random_floats(n, rng);
      floats y(n);
      doubles want(n);
      kernels::dropout_apply<double>(want.data(), widen(x).data(), std::int64_t(n), p, 1234, 77);
      backend.dropout_apply(y, x, p, 1234, 77);
      require_close("y", y, want, 1e-6);
      std::size_t dropped = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if ((y[i] == 0) != (want[i] == 0)) FAIL("element " << i << " dropped by one kernel and not the other");
        dropped += want[i] == 0;
      }
      if (p > 0 && n > 1000) CHECK(std::abs(double(dropped) / n - p) < 0.01);
    }
  for (auto [n, w, p, with_bias] : {std::tuple{1, 1, 0.f, true}, {7, 33, 0.3f, true}, {64, 1000, 0.3f, false}}) {
    INFO(backend.name() << " bias_dropout_add n=" << n << " w=" << w << " p=" << p << " bias=" << with_bias);
    const std::size_t nw = std::size_t(n) * w;
    const floats residual = random_floats(nw, rng), x = random_floats(nw, rng);
    const floats bias = with_bias ? random_floats(w, rng) : floats{};
    floats out(nw);
    doubles want(nw), bias64 = widen(bias);
    kernels::bias_dropout_add<double>(want.data(), widen(residual).data(), widen(x).data(),
                                      with_bias ? bias64.data() : nullptr, n, w, p, 555, 3 * nw);
    backend.bias_dropout_add(out, residual, x, bias, n, w, p, 555, 3 * nw);
    require_close("out", out, want, 1e-6);
  }
}

void check_bias(kernel_backend& backend) {
  std::mt19937 rng(131);
  for (auto [n, w] : {std::pair{1, 1}, {7, 33}, {1000, 129}}) {
    INFO(backend.name() << " bias n=" << n << " w=" << w);
    const std::size_t nw = std::size_t(n) * w;
    const floats bias = random_floats(w, rng), dy = random_floats(nw, rng);
    floats y = random_floats(nw, rng), dbias = random_floats(w, rng);
    doubles want_y = widen(y), want_dbias = widen(dbias);
    kernels::bias_add<double>(want_y.data(), widen(bias).data(), n, w);
    kernels::bias_backward<double>(want_dbias.data(), widen(dy).data(), n, w);
    backend.bias(y, dbias, bias, dy, n, w);
    require_close("y", y, want_y, 1e-6), require_close("dbias", dbias, want_dbias, 1e-5);
  }
}

void check_squared_relu(kernel_backend& backend) {
  std::mt19937 rng(101);
  for (auto [rows, width] : {std::pair{1, 1}, {5, 33}, {300, 1025}}) {
    INFO(backend.name() << " squared_relu rows=" << rows << " width=" << width);
    const std::size_t n = std::size_t(rows) * width;
    const floats x = random_floats(n, rng, 3.f), dy = random_floats(n, rng), w = random_floats(rows, rng);
    floats y(n), dx(n), wy(n), wdx(n), wdw(rows);
    doubles want_y(n), want_dx(n), want_wy(n), want_wdx(n), want_wdw(rows);
    const doubles x64 = widen(x), dy64 = widen(dy), w64 = widen(w);
    kernels::squared_relu_forward<double>(want_y.data(), x64.data(), std::int64_t(n));
    kernels::squared_relu_backward<double>(want_dx.data(), dy64.data(), x64.data(), std::int64_t(n));
    kernels::weighted_squared_relu_forward<double>(want_wy.data(), x64.data(), w64.data(), rows, width);
    kernels::weighted_squared_relu_backward<double>(want_wdx.data(), want_wdw.data(), dy64.data(), x64.data(),
                                                    w64.data(), rows, width);
    backend.squared_relu(y, dx, x, dy);
    backend.weighted_squared_relu(wy, wdx, wdw, x, w, dy, rows, width);
    require_close("y", y, want_y, 1e-6), require_close("dx", dx, want_dx, 1e-6);
    require_close("weighted y", wy, want_wy, 1e-6), require_close("weighted dx", wdx, want_wdx, 1e-6);
    // dw sums up to 1025 terms as large as 9 in fp32.
    require_close("weighted dw", wdw, want_wdw, 1e-4);
  }
}

// Every value's bf16 and fp16 bits are those of the host's rounding (tensor/half_float.hpp):
// ties to even, fp16's subnormals, zeros and overflow to infinity included; widening is exact.
void check_convert(kernel_backend& backend) {
  std::mt19937 rng(121);
  floats x = {0.f, -0.f, 1.f + 0x1.0p-8f, 1.f + 3 * 0x1.0p-8f, 1.f + 0x1.0p-11f, 1.f + 3 * 0x1.0p-11f,
              65504.f, 65520.f, 1e6f, -1e6f, 0x1.0p-24f, 0x1.8p-25f, 1e-10f, 3.4e38f, -3.4e38f};
  std::uniform_real_distribution<float> exponent(-30.f, 30.f), sign(-1.f, 1.f);
  for (int i = 0; i < 100000; ++i) x.push_back(std::copysign(std::exp2(exponent(rng)), sign(rng)));
  INFO(backend.name() << " 16-bit conversions of " << x.size() << " values");
  bf16s bf16(x.size());
  halves fp16(x.size());
  floats bf16_back(x.size()), fp16_back(x.size());
  backend.round_to_16_bits(x, bf16, fp16, bf16_back, fp16_back);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (bf16[i].bits != tensor::to_bfloat16(x[i]).bits) FAIL("bf16 of " << x[i] << ": bits " << bf16[i].bits);
    if (fp16[i].bits != tensor::to_float16(x[i]).bits) FAIL("fp16 of " << x[i] << ": bits " << fp16[i].bits);
    if (bf16_back[i] != tensor::to_float(bf16[i])) FAIL("bf16 widening of " << bf16[i].bits);
    if (fp16_back[i] != tensor::to_float(fp16[i])) FAIL("fp16 widening of " << fp16[i].bits);
  }
  SUCCEED(x.size() << " values round and widen to the host's bits");
}

namespace {
tensor::tensor_view view_of(doubles& v) { return {v.data(), {std::int64_t(v.size())}, tensor::dtype::float64}; }
}  // namespace

void check_moe_rows(kernel_backend& backend) {
  std::mt19937 rng(111);
  for (const int w : {1, 7, 1000}) {
    INFO(backend.name() << " moe rows w=" << w);
    // 10 source rows; 13 picks with repeats (a token routed to two experts of this rank).
    const row_ids rows = {3, 3, 0, 9, 5, 1, 9, 2, 8, 3, 4, 6, 7};
    const auto n = std::int64_t(rows.size());
    const floats table = random_floats(10 * std::size_t(w), rng), picked = random_floats(n * w, rng);
    const floats scale = random_floats(n, rng);
    floats gathered(n * w), summed = random_floats(10 * std::size_t(w), rng), scaled(n * w), dots(n);
    doubles want_gathered(gathered.size()), want_summed = widen(summed), want_scaled(scaled.size()), want_dots(n);
    doubles table64 = widen(table), picked64 = widen(picked), scale64 = widen(scale);
    kernels::gather_rows(view_of(want_gathered), view_of(table64), rows, w);
    kernels::scatter_add_rows(view_of(want_summed), view_of(picked64), rows, w);
    kernels::scale_rows(view_of(want_scaled), view_of(picked64), view_of(scale64), n, w);
    kernels::row_dots(view_of(want_dots), view_of(picked64), view_of(want_gathered), n, w);
    backend.gather_rows(gathered, table, rows, w);
    backend.scatter_add_rows(summed, picked, rows, w);
    backend.scale_rows(scaled, picked, scale, w);
    backend.row_dots(dots, picked, gathered, w);
    require_close("gathered", gathered, want_gathered, 0), require_close("summed", summed, want_summed, 1e-6);
    require_close("scaled", scaled, want_scaled, 1e-6), require_close("dots", dots, want_dots, 1e-5);
  }
}

}  // namespace mactor::testing
