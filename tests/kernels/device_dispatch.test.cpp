// The tensor entry points hand views on a device to the backend registered for it, after their
// own size checks, with every argument in its place; without a backend they name the kernel and
// the device. A recording backend stands in for CUDA, so this runs on any machine.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/adam.hpp"
#include "kernels/attention.hpp"
#include "kernels/bias.hpp"
#include "kernels/convert.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/fp8.hpp"
#include "kernels/gelu.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/mla_rope.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/reductions.hpp"
#include "kernels/ring_attention_block.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sgd.hpp"
#include "kernels/ssd_scan.hpp"
#include "kernels/causal_conv1d.hpp"
#include "kernels/column_copy.hpp"
#include "kernels/gated_rmsnorm.hpp"
#include "kernels/squared_relu.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/tensor_ops.hpp"

using namespace mactor;

namespace {

// One call as the backend saw it: the kernel, its first view's data and its integer arguments.
struct call {
  std::string kernel;
  const void* first;
  std::vector<long long> sizes;
  bool operator==(const call&) const = default;
};

class recording_kernels final : public kernels::device_kernels {
 public:
  std::vector<call> calls;
  void scale(view x, double) override { note("scale", x, {}); }
  void add(view dst, input) override { note("add", dst, {}); }
  void copy(view dst, input) override { note("copy", dst, {}); }
  void fill_zero(view x) override { note("fill_zero", x, {}); }
  void convert(view dst, input) override { note("convert", dst, {}); }
  void round_through(view x, tensor::dtype type) override { note("round_through", x, {(long long)type}); }
  void bias_add(view y, input, int n, int w) override { note("bias_add", y, {n, w}); }
  void bias_backward(view dbias, input, int n, int w) override { note("bias_backward", dbias, {n, w}); }
  void linear_forward(input x, input, view, int rows, int in, int out, double) override {
    note("linear_forward", x, {rows, in, out});
  }
  void linear_backward_input(input dy, input, view, int rows, int in, int out, double) override {
    note("linear_backward_input", dy, {rows, in, out});
  }
  void linear_backward_weight(input dy, input, view, int rows, int in, int out) override {
    note("linear_backward_weight", dy, {rows, in, out});
  }
  void rmsnorm_forward(view y, view, input, input, int n, int h, double, bool) override {
    note("rmsnorm_forward", y, {n, h});
  }
  void rmsnorm_backward(view dx, view, input, input, input, input, int n, int h, bool, bool) override {
    note("rmsnorm_backward", dx, {n, h});
  }
  void layernorm_forward(view y, view, view, input, input, input, int n, int h, double, bool) override {
    note("layernorm_forward", y, {n, h});
  }
  void layernorm_backward(view dx, view, view, input, input, input, input, input, int n, int h, bool, bool) override {
    note("layernorm_backward", dx, {n, h});
  }
  void gelu_forward(view y, input, std::int64_t n, bool) override { note("gelu_forward", y, {n}); }
  void gelu_backward(view dx, input, input, std::int64_t n, bool) override { note("gelu_backward", dx, {n}); }
  void swiglu_forward(view y, input, int n, int f) override { note("swiglu_forward", y, {n, f}); }
  void swiglu_backward(view dx, input, input, int n, int f) override { note("swiglu_backward", dx, {n, f}); }
  void squared_relu_forward(view y, input, std::int64_t n) override { note("squared_relu_forward", y, {n}); }
  void squared_relu_backward(view dx, input, input, std::int64_t n) override { note("squared_relu_backward", dx, {n}); }
  void gather_rows(view out, input, std::span<const std::int64_t> rows, int w) override {
    note("gather_rows", out, {(long long)rows.size(), w});
  }
  void scatter_add_rows(view out, input, std::span<const std::int64_t> rows, int w) override {
    note("scatter_add_rows", out, {(long long)rows.size(), w});
  }
  void scale_rows(view out, input, input, std::int64_t n, int w) override { note("scale_rows", out, {n, w}); }
  void row_dots(view out, input, input, std::int64_t n, int w) override { note("row_dots", out, {n, w}); }
  void dropout_apply(view y, input, std::int64_t n, float, std::uint64_t stream, std::uint64_t first) override {
    note("dropout_apply", y, {n, (long long)stream, (long long)first});
  }
  void bias_dropout_add(view out, input, input, input, int n, int w, float, std::uint64_t, std::uint64_t) override {
    note("bias_dropout_add", out, {n, w});
  }
  void attention_forward(view out, view, input, const kernels::attention_dims& d, double, float, std::uint64_t, input,
                         input) override {
    note("attention_forward", out, {d.seq, d.heads});
  }
  void attention_backward(view dqkv, input, input, input, const kernels::attention_dims& d, double, float,
                          std::uint64_t, input, view, input, view) override {
    note("attention_backward", dqkv, {d.seq, d.heads});
  }
  void ring_block_forward(view m, view, view, input, input, const kernels::ring_block_dims& r, double, float,
                          std::uint64_t stream) override {
    note("ring_block_forward", m, {r.local_length, r.d.heads, (long long)stream});
  }
  void ring_block_backward(view dq, view, input, input, input, input, input, const kernels::ring_block_dims& r,
                           double, float, std::uint64_t stream) override {
    note("ring_block_backward", dq, {r.local_length, r.d.heads, (long long)stream});
  }
  void rope_apply(view x, input, input, int seq, int batch, int, int, int head_dim, int rot_dim, std::int64_t,
                  std::int64_t, bool, bool) override {
    note("rope_apply", x, {seq, batch, head_dim, rot_dim});
  }
  void mla_rope_apply(view x, input, input, int seq, int batch, int heads, std::int64_t, std::int64_t, std::int64_t,
                      int rot_dim, bool) override {
    note("mla_rope_apply", x, {seq, batch, heads, rot_dim});
  }
  void embedding_forward(view out, input, const std::int32_t*, int n, int hidden, int, int, double) override {
    note("embedding_forward", out, {n, hidden});
  }
  void embedding_backward(view dtable, input, const std::int32_t*, int n, int hidden, int, int) override {
    note("embedding_backward", dtable, {n, hidden});
  }
  void cross_entropy_row_max(view row_max, input, int n, int v) override { note("cross_entropy_row_max", row_max, {n, v}); }
  void cross_entropy_shard_sums(view sum_exp, view, view, input, const std::int32_t*, int n, int v, int) override {
    note("cross_entropy_shard_sums", sum_exp, {n, v});
  }
  void cross_entropy_loss(view loss, input, input, input, int n) override { note("cross_entropy_loss", loss, {n}); }
  void cross_entropy_backward(view exps, input, const std::int32_t*, input, int n, int v, int) override {
    note("cross_entropy_backward", exps, {n, v});
  }
  void adam_step(view value, input, view, view, const kernels::adam_hyperparameters& h) override {
    note("adam_step", value, {value.numel(), h.step});
  }
  double sum_of_squares(input x) override {
    note("sum_of_squares", x, {x.numel()});
    return 2.5;
  }
  double count_zeros(input x) override {
    note("count_zeros", x, {x.numel()});
    return 3.0;
  }
  void copy_columns(view dst, kernels::column_block, input, kernels::column_block, int columns, int seq,
                    int batch) override {
    note("copy_columns", dst, {columns, seq, batch});
  }
  void causal_conv1d_forward(view y, input, input, input, int batch, int seq, int channels, int width, bool) override {
    note("causal_conv1d_forward", y, {batch, seq, channels, width});
  }
  void causal_conv1d_backward(view dx, view, view, input, input, input, input, int batch, int seq, int channels,
                              int width, bool) override {
    note("causal_conv1d_backward", dx, {batch, seq, channels, width});
  }
  void gated_rmsnorm_forward(view y, view, input, input, input, int n, int d, int group_size, double) override {
    note("gated_rmsnorm_forward", y, {n, d, group_size});
  }
  void gated_rmsnorm_backward(view dx, view, view, input, input, input, input, input, int n, int d,
                              int group_size) override {
    note("gated_rmsnorm_backward", dx, {n, d, group_size});
  }
  void ssd_scan_forward(view y, view, input, input, input, input, input, input, input,
                        const kernels::ssd_shape& s) override {
    note("ssd_scan_forward", y, {s.batch, s.seq, s.heads, s.chunk});
  }
  void ssd_scan_backward(view dx, view, view, view, view, view, view, input, input, input, input, input, input, input,
                         input, input, const kernels::ssd_shape& s) override {
    note("ssd_scan_backward", dx, {s.batch, s.seq, s.heads, s.chunk});
  }
  void sgd_step(view value, input, view buf, const kernels::sgd_hyperparameters& h) override {
    note("sgd_step", value, {value.numel(), buf.data ? 1 : 0, h.first_step ? 1 : 0});
  }
  float amax(input x) override {
    note("amax", x, {x.numel()});
    return 4.5f;
  }
  void round_through_fp8(view out, input, float, float, kernels::fp8_type t) override {
    note("round_through_fp8", out, {out.numel(), (long long)t});
  }
  void round_through_fp8_blocks(view out, input, int rows, int cols, int block_rows, int block_cols,
                                kernels::block_scale_rule, kernels::fp8_type) override {
    note("round_through_fp8_blocks", out, {rows, cols, block_rows, block_cols});
  }

 private:
  void note(const char* kernel, const tensor::const_tensor_view& first, std::vector<long long> sizes) {
    calls.push_back({kernel, first.data, std::move(sizes)});
  }
};

// Stand-in device memory: host floats the entry points never touch (only the backend would).
struct fake_device_buffer {
  std::vector<float> bytes;
  tensor::tensor_view view(std::int64_t n) {
    bytes.resize(std::size_t(n));
    return {bytes.data(), {n}, tensor::dtype::float32, {tensor::device_type::cuda, 0}};
  }
};

// The backend is registered for the scope of one test.
struct registered_backend {
  recording_kernels kernels;
  registered_backend() { mactor::kernels::register_device_kernels(tensor::device_type::cuda, &kernels); }
  ~registered_backend() { mactor::kernels::register_device_kernels(tensor::device_type::cuda, nullptr); }
};

}  // namespace

TEST_CASE("a kernel on a device with no backend is an error naming the kernel and the device") {
  fake_device_buffer a, b;
  CHECK_THROWS_WITH(kernels::scale(a.view(4), 2.0), "kernel scale has no implementation for fp32 on cuda:0");
  CHECK_THROWS_WITH(kernels::rmsnorm_forward(a.view(6), b.view(2), a.view(6), b.view(3), 2, 3, 1e-5, false),
                    "kernel rmsnorm_forward has no implementation for fp32 on cuda:0");
}

TEST_CASE("the tensor entry points hand device views to the device's backend with their arguments") {
  registered_backend backend;
  fake_device_buffer x, y, z, w, s;
  const std::int32_t ids[3] = {0, 1, 2};
  const auto X = x.view(64), Y = y.view(64), Z = z.view(64), W = w.view(64), S = s.view(8);
  kernels::scale(X, 2.0);
  kernels::add(X, Y);
  kernels::copy(X, Y);
  kernels::fill_zero(X);
  kernels::convert(X, Y);
  kernels::round_through(X, tensor::dtype::bfloat16);
  kernels::bias_add(X, S, 8, 8);
  kernels::bias_backward(S, X, 8, 8);
  kernels::linear_forward(X, Y, Z, 4, 3, 5);
  kernels::linear_backward_input(X, Y, Z, 4, 3, 5);
  kernels::linear_backward_weight(X, Y, Z, 4, 3, 5);
  kernels::rmsnorm_forward(X, S, Y, W, 4, 8, 1e-5, false);
  kernels::rmsnorm_backward(X, W, Y, Z, W, S, 4, 8, false, false);
  kernels::layernorm_forward(X, S, S, Y, W, {}, 4, 8, 1e-5, false);
  kernels::layernorm_backward(X, W, {}, Y, Z, W, S, S, 4, 8, false, false);
  // The weight gradients alone (the zero-bubble W pass): no dx, still the device's.
  kernels::rmsnorm_backward({}, W, Y, Z, W, S, 4, 8, false, false);
  kernels::layernorm_backward({}, W, W, Y, Z, W, S, S, 4, 8, false, false);
  kernels::gelu_forward(X, Y, 64, false);
  kernels::gelu_backward(X, Y, Z, 64, false);
  kernels::swiglu_forward(X, Y, 4, 8);
  kernels::swiglu_backward(Y, X, Z, 4, 8);
  kernels::squared_relu_forward(X, Y, 64);
  kernels::squared_relu_backward(X, Y, Z, 64);
  const std::vector<std::int64_t> rows = {3, 0, 3};
  kernels::gather_rows(X, Y, rows, 8);
  kernels::scatter_add_rows(X, Y, rows, 8);
  kernels::scale_rows(X, Y, S, 8, 8);
  kernels::row_dots(S, X, Y, 8, 8);
  kernels::dropout_apply(X, Y, 64, 0.1f, 7, 9);
  kernels::bias_dropout_add(X, Y, Z, {}, 8, 8, 0.1f, 7, 0);
  kernels::attention_dims d;
  d.seq = 2, d.batch = 1, d.heads = 2, d.groups = 1, d.head_dim = 2, d.total_heads = 2;
  kernels::attention_forward(X, Y, Z, d, 0.5, 0.f, 0);
  kernels::attention_backward(X, Y, Z, W, d, 0.5, 0.f, 0);
  kernels::ring_block_dims r;  // this rank's 2 positions against a block of 2, 2 heads of 2 in one group
  r.d = d, r.local_length = 2, r.seq_length = 4, r.num_queries = 1, r.num_keys = 1;
  r.queries[0] = {0, 2, 2}, r.keys[0] = {0, 0, 2};
  kernels::ring_block_forward(S, S, X, Y, Z, r, 0.5, 0.f, 5);
  kernels::ring_block_backward(X, Z, W, Y, Z, S, S, r, 0.5, 0.f, 6);
  kernels::rope_apply(X, Y, Z, 2, 2, 1, 2, 4, 4, 8, 8, false, false);
  kernels::mla_rope_apply(X, Y, Z, 2, 2, 2, 16, 8, 2, 4, false);
  kernels::embedding_forward(X, Y, ids, 3, 4, 0, 10);
  kernels::embedding_backward(X, Y, ids, 3, 4, 0, 10);
  kernels::cross_entropy_row_max(S, X, 3, 5);
  kernels::cross_entropy_shard_sums(S, S, X, S, ids, 3, 5, 0);
  kernels::cross_entropy_loss(S, S, S, S, 3);
  kernels::cross_entropy_backward(X, S, ids, S, 3, 5, 0);
  kernels::adam_hyperparameters h;
  h.step = 4;
  kernels::adam_step(X, Y, Z, W, h);
  CHECK(kernels::sum_of_squares(Y) == 2.5);  // the backend's result comes back
  CHECK(kernels::count_zeros(Z) == 3.0);
  kernels::copy_columns(X, {kernels::row_order::batch_seq, 8, 2}, Y, {kernels::row_order::seq_batch, 8, 0}, 4, 2, 4);
  kernels::causal_conv1d_forward(X, Y, S, {}, 2, 4, 8, 1, true);
  kernels::causal_conv1d_backward(X, S, {}, Y, Z, S, {}, 2, 4, 8, 1, true);
  kernels::gated_rmsnorm_forward(X, S, Y, Z, S, 4, 8, 4, 1e-5);
  kernels::gated_rmsnorm_backward(X, Z, S, Y, Z, W, S, S, 4, 8, 4);
  kernels::ssd_shape ssd{.batch = 1, .seq = 4, .heads = 2, .head_dim = 2, .groups = 1, .state = 2, .chunk = 2};
  kernels::ssd_scan_forward(X, Y, Z, S, S, W, W, S, S, ssd);
  kernels::ssd_scan_backward(X, S, S, Y, Z, S, S, W, Y, Z, S, S, W, W, S, S, ssd);
  kernels::sgd_hyperparameters sgd;
  sgd.momentum = 0.9, sgd.first_step = true;
  kernels::sgd_step(X, Y, Z, sgd);
  sgd.momentum = 0, sgd.first_step = false;  // no buffer: the backend sees an empty one
  kernels::sgd_step(X, Y, Z, sgd);
  CHECK(kernels::amax(W) == 4.5f);
  kernels::round_through_fp8(X, Y, 2.f, 0.5f, kernels::fp8_type::e5m2);
  kernels::round_through_fp8_blocks(X, Y, 8, 8, 1, 32, kernels::block_scale_rule::e8m0, kernels::fp8_type::e4m3);
  const std::vector<call> want = {
      {"scale", X.data, {}},
      {"add", X.data, {}},
      {"copy", X.data, {}},
      {"fill_zero", X.data, {}},
      {"convert", X.data, {}},
      {"round_through", X.data, {(long long)tensor::dtype::bfloat16}},
      {"bias_add", X.data, {8, 8}},
      {"bias_backward", S.data, {8, 8}},
      {"linear_forward", X.data, {4, 3, 5}},
      {"linear_backward_input", X.data, {4, 3, 5}},
      {"linear_backward_weight", X.data, {4, 3, 5}},
      {"rmsnorm_forward", X.data, {4, 8}},
      {"rmsnorm_backward", X.data, {4, 8}},
      {"layernorm_forward", X.data, {4, 8}},
      {"layernorm_backward", X.data, {4, 8}},
      {"rmsnorm_backward", nullptr, {4, 8}},
      {"layernorm_backward", nullptr, {4, 8}},
      {"gelu_forward", X.data, {64}},
      {"gelu_backward", X.data, {64}},
      {"swiglu_forward", X.data, {4, 8}},
      {"swiglu_backward", Y.data, {4, 8}},
      {"squared_relu_forward", X.data, {64}},
      {"squared_relu_backward", X.data, {64}},
      {"gather_rows", X.data, {3, 8}},
      {"scatter_add_rows", X.data, {3, 8}},
      {"scale_rows", X.data, {8, 8}},
      {"row_dots", S.data, {8, 8}},
      {"dropout_apply", X.data, {64, 7, 9}},
      {"bias_dropout_add", X.data, {8, 8}},
      {"attention_forward", X.data, {2, 2}},
      {"attention_backward", X.data, {2, 2}},
      {"ring_block_forward", S.data, {2, 2, 5}},
      {"ring_block_backward", X.data, {2, 2, 6}},
      {"rope_apply", X.data, {2, 2, 4, 4}},
      {"mla_rope_apply", X.data, {2, 2, 2, 4}},
      {"embedding_forward", X.data, {3, 4}},
      {"embedding_backward", X.data, {3, 4}},
      {"cross_entropy_row_max", S.data, {3, 5}},
      {"cross_entropy_shard_sums", S.data, {3, 5}},
      {"cross_entropy_loss", S.data, {3}},
      {"cross_entropy_backward", X.data, {3, 5}},
      {"adam_step", X.data, {64, 4}},
      {"sum_of_squares", Y.data, {64}},
      {"count_zeros", Z.data, {64}},
      {"copy_columns", X.data, {4, 2, 4}},
      {"causal_conv1d_forward", X.data, {2, 4, 8, 1}},
      {"causal_conv1d_backward", X.data, {2, 4, 8, 1}},
      {"gated_rmsnorm_forward", X.data, {4, 8, 4}},
      {"gated_rmsnorm_backward", X.data, {4, 8, 4}},
      {"ssd_scan_forward", X.data, {1, 4, 2, 2}},
      {"ssd_scan_backward", X.data, {1, 4, 2, 2}},
      {"sgd_step", X.data, {64, 1, 1}},
      {"sgd_step", X.data, {64, 0, 0}},
      {"amax", W.data, {64}},
      {"round_through_fp8", X.data, {64, (long long)kernels::fp8_type::e5m2}},
      {"round_through_fp8_blocks", X.data, {8, 8, 1, 32}},
  };
  REQUIRE(backend.kernels.calls.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("call " << i << ": " << want[i].kernel);
    CHECK(backend.kernels.calls[i] == want[i]);
  }
}

TEST_CASE("an entry point checks sizes before a device backend sees the views") {
  registered_backend backend;
  fake_device_buffer x, y;
  CHECK_THROWS_WITH(kernels::gelu_forward(x.view(3), y.view(4), 4, false), Catch::Contains("gelu_forward"));
  CHECK_THROWS_WITH(kernels::adam_step(x.view(3), y.view(4), x.view(3), x.view(3), {}), Catch::Contains("adam_step"));
  CHECK(backend.kernels.calls.empty());
}
