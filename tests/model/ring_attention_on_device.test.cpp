// Ring attention (--cp-comm-type p2p) and hierarchical a2a+p2p attention with their tensors on the
// strict pseudo-device (tests/kernels/pseudo_device.hpp) against the same ranks on the host:
// outputs, log-sum-exps, qkv gradients and sink gradients bit for bit, with a sliding window, a
// sink logit and attention dropout, in fp32 and bf16, cp = 2 and 4. The blocks go around the
// ring through host copies; a host access the port missed fails here.
#include <catch2/catch.hpp>

#include <memory>
#include <span>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/dropout.hpp"
#include "model/hierarchical_cp_attention.hpp"
#include "model/local_group.hpp"
#include "model/ring_attention.hpp"
#include "tensor/default_device.hpp"
#include "tensor/transfer.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/kernels/pseudo_device.hpp"
#include "tests/model/device_step.hpp"
#include "tests/tools/rank_threads.hpp"

using namespace mactor;

namespace {

struct setup {
  int cp = 2;
  int a2a = 1;  // > 1: hierarchical attention with level-0 groups of this size
  tensor::dtype type = tensor::dtype::float32;
  int window = -1;
  bool sink = false;
  float dropout = 0.0f;
};

// What one rank computed, as bytes read back to the host.
struct rank_output {
  std::vector<std::byte> out, lse, dqkv, dsink;
};

// `values` (fp64) as a tensor of `type` on `where`.
tensor::tensor make(const std::vector<double>& values, tensor::dtype type, tensor::device where) {
  std::vector<float> f(values.begin(), values.end());
  tensor::tensor host({std::int64_t(f.size())}, type, tensor::memory_kind::activations);
  kernels::convert(host.view(), tensor::view_of(std::span<const float>(f)));
  return tensor::copy_to(host.view(), where, tensor::memory_kind::activations);
}

// Every rank's forward and backward (a thread each) with its tensors on `where`.
std::vector<rank_output> run_ranks(const setup& s, tensor::device where) {
  kernels::attention_dims full;
  full.seq = 16, full.batch = 2, full.heads = 4, full.groups = 2, full.head_dim = 8, full.total_heads = 4;
  full.window = s.window;
  const std::int64_t width = full.qkv_width(), out_width = full.heads * full.head_dim;
  const auto stream = kernels::dropout_stream(7, 1, 0, 3);
  const double scale = 0.35;
  auto groups = model::make_local_groups(s.cp);
  const int p = s.cp / s.a2a;
  std::vector<std::vector<std::unique_ptr<model::group>>> level0, level1;
  for (int j = 0; j < p; ++j) level0.push_back(model::make_local_groups(s.a2a));
  for (int i = 0; i < s.a2a; ++i) level1.push_back(model::make_local_groups(p));
  std::vector<rank_output> outputs(std::size_t(s.cp));
  test::on_rank_threads(s.cp, [&](int r) {
    tensor::default_device_scope scope(where);  // the layers' own buffers go there, as in a model
    const model::sequence_shard shard{full.seq, s.cp, r};
    kernels::attention_dims d = full;
    d.seq = shard.local_length();
    const std::int64_t rows = std::int64_t(d.seq) * d.batch;
    const auto compute = kernels::compute_dtype(s.type);
    auto qkv = make(test::random_vector(std::size_t(rows * width), 50 + r, 1.5), s.type, where);
    auto dout = make(test::random_vector(std::size_t(rows * out_width), 60 + r), s.type, where);
    auto sink = make(test::random_vector(std::size_t(full.heads), 33), s.type, where);
    tensor::tensor out({rows * out_width}, s.type, tensor::memory_kind::activations, where);
    tensor::tensor lse({rows * d.heads}, compute, tensor::memory_kind::activations, where);
    tensor::tensor dqkv({rows * width}, s.type, tensor::memory_kind::activations, where);
    tensor::tensor dsink({full.heads}, s.type, tensor::memory_kind::activations, where);
    const auto sink_view = s.sink ? tensor::const_tensor_view(sink) : tensor::const_tensor_view{};
    const auto dsink_view = s.sink ? dsink.view() : tensor::tensor_view{};
    if (s.a2a == 1) {
      model::ring_attention ring(*groups[std::size_t(r)], shard);
      ring.forward(out, lse, qkv, d, scale, s.dropout, stream, sink_view);
      ring.backward(dqkv, dout, qkv, out, lse, d, scale, s.dropout, stream, sink_view, dsink_view);
    } else {
      model::hierarchical_cp_attention h(*level0[std::size_t(r / s.a2a)][std::size_t(r % s.a2a)],
                                         *level1[std::size_t(r % s.a2a)][std::size_t(r / s.a2a)], shard, d.groups);
      h.forward(out, qkv, d, scale, s.dropout, stream, sink_view);
      h.backward(dqkv, dout, d, scale, s.dropout, stream, sink_view, dsink_view);
      lse.zero();  // kept inside the hierarchical layer
    }
    auto& o = outputs[std::size_t(r)];
    o.out = test::bytes_of(out), o.lse = test::bytes_of(lse), o.dqkv = test::bytes_of(dqkv);
    o.dsink = test::bytes_of(dsink);
  });
  return outputs;
}

void check_same_on_device(const setup& s) {
  CAPTURE(s.cp, s.a2a, tensor::short_name(s.type), s.window, s.sink, s.dropout);
  const auto host = run_ranks(s, tensor::cpu);
  test::pseudo_device device;
  const auto calls_before = device.kernel_calls();
  const auto on_device = run_ranks(s, device.where);
  CHECK(device.kernel_calls() > calls_before);
  CHECK(device.live_bytes() == 0);
  for (int r = 0; r < s.cp; ++r) {
    CAPTURE(r);
    const auto &h = host[std::size_t(r)], &g = on_device[std::size_t(r)];
    CHECK(g.out == h.out);
    CHECK(g.lse == h.lse);
    CHECK(g.dqkv == h.dqkv);
    CHECK(g.dsink == h.dsink);
  }
}

}  // namespace

TEST_CASE("ring attention on the pseudo-device gives the host's outputs and gradients bit for bit") {
  for (int cp : {2, 4}) {
    check_same_on_device({cp, 1, tensor::dtype::float32});
    check_same_on_device({cp, 1, tensor::dtype::float32, 5, true, 0.25f});
    check_same_on_device({cp, 1, tensor::dtype::bfloat16, -1, true, 0.25f});
  }
}

TEST_CASE("hierarchical a2a+p2p attention on the pseudo-device gives the host's outputs and gradients bit for bit") {
  check_same_on_device({4, 2, tensor::dtype::float32, -1, true, 0.25f});
  check_same_on_device({4, 2, tensor::dtype::bfloat16});
}
