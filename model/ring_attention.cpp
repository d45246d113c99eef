// Ring attention's blocks (online softmax forward, recomputing backward) and the ring driver.
#include "model/ring_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/dispatch.hpp"
#include "model/activation.hpp"
#include "model/group.hpp"
#include "model/ring_attention_blocks.hpp"

namespace mactor::model {
namespace {

using clock_type = timed_transfer::clock;

using ring_blocks::backward_rows;
using ring_blocks::dropout_mask;
using ring_blocks::forward_state;
using ring_blocks::layout;

// qkv's keys and values -> a block (bytes: elements of `bytes` each, the model's dtype); the
// block's gradients (of the compute type) -> dqkv's key and value parts.
void pack_block(std::byte* block, const std::byte* qkv, const layout& L, std::int64_t rows, std::size_t bytes) {
  const std::size_t head_pair = std::size_t(2 * L.d.head_dim) * bytes;
  for (std::int64_t r = 0; r < rows; ++r)
    for (int g = 0; g < L.d.groups; ++g)
      std::memcpy(block + std::size_t(L.block_at(r, g)) * bytes, qkv + std::size_t(L.k_at(r, g)) * bytes, head_pair);
}
template <typename T>
void unpack_block(T* dqkv, const T* block, const layout& L, std::int64_t rows) {
  const std::int64_t hd = L.d.head_dim;
  for (std::int64_t r = 0; r < rows; ++r)
    for (int g = 0; g < L.d.groups; ++g) std::copy_n(block + L.block_at(r, g), 2 * hd, dqkv + L.k_at(r, g));
}

// The first n elements at data (of dtype type) as the compute type A: in place when they are
// of A, else widened exactly into scratch (a 16-bit model's tensor or block).
template <typename A>
const A* as_compute(std::vector<A>& scratch, const void* data, tensor::dtype type, std::int64_t n) {
  if (type == tensor::dtype_of<A>()) return static_cast<const A*>(data);
  scratch.resize(std::size_t(n));
  kernels::convert(tensor::view_of(std::span<A>(scratch)), tensor::const_tensor_view(data, {n}, type));
  return scratch.data();
}
// values (of A) into v's first values.size() elements: copied, or rounded once to v's 16-bit dtype.
template <typename A>
void store(tensor::tensor_view v, const std::vector<A>& values) {
  kernels::convert(tensor::tensor_view(v.data, {std::int64_t(values.size())}, v.type, v.where),
                   tensor::view_of(std::span<const A>(values)));
}

template <typename T>
T dot(const T* a, const T* b, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// A block shift in flight while the blocks compute (group::start_ring_shift), moved along
// between tiles and timed: from its start until it was seen done, and the wait left after the
// compute. `what` says what arrives from the rank `step` places back on the ring (step 1: the
// previous one; -1: the next), for the inspector and the stall report ("KV block 2 of 3 from
// rank 4 in ring attention").
class timed_shift {
 public:
  timed_shift(group& cp, const std::byte* send, std::byte* recv, std::size_t bytes, ring_timing& t, std::string what,
              int step = 1)
      : timing_(t), start_(clock_type::now()), pending_(cp.start_ring_shift(send, recv, bytes, step, std::move(what))) {}

  /// Between tiles: drives the transfer and notes when it is done.
  void poll() {
    if (!done_ && pending_->test()) done_ = true, timing_.transfer_s += timed_transfer::seconds_since(start_);
  }
  void wait() {
    const auto waiting = clock_type::now();
    pending_->wait();
    timing_.wait_s += timed_transfer::seconds_since(waiting);
    if (!done_) timing_.transfer_s += timed_transfer::seconds_since(start_);
    ++timing_.transfers;
  }
  ring_blocks::between_tiles between() {
    return [this] { poll(); };
  }

 private:
  ring_timing& timing_;
  clock_type::time_point start_;
  std::unique_ptr<pending_shift> pending_;
  bool done_ = false;
};

template <typename T>
T sink_of(const T* sink, int h) {
  return sink ? sink[h] : -std::numeric_limits<T>::infinity();
}

}  // namespace

ring_attention::ring_attention(group& cp, const sequence_shard& shard) : cp_(cp), shard_(shard) {
  if (cp.size() != shard.cp_size || cp.rank() != shard.cp_rank)
    throw std::invalid_argument("ring_attention: the context-parallel group (rank " + std::to_string(cp.rank()) +
                                " of " + std::to_string(cp.size()) + ") is not the shard's (rank " +
                                std::to_string(shard.cp_rank) + " of " + std::to_string(shard.cp_size) + ")");
}

void ring_attention::forward(tensor::tensor_view out, tensor::tensor_view lse, tensor::const_tensor_view qkv,
                             const kernels::attention_dims& dims, double scale, float dropout_p,
                             std::uint64_t dropout_stream, tensor::const_tensor_view sink) {
  timing_ = {};
  const layout L{dims, shard_};
  const std::int64_t rows = std::int64_t(shard_.local_length()) * dims.batch, hd = dims.head_dim;
  const dropout_mask drop{dropout_p, dropout_stream, dims, std::uint64_t(shard_.seq_length)};
  // A 16-bit model's blocks travel in 16 bits; each is widened to fp32 to compute on, and the
  // running max, sum and output stay in fp32 until the output is rounded once at the end.
  kernels::dispatch_compute("ring_attention::forward", qkv.type, qkv.where, [&](auto zero) {
    using A = decltype(zero);
    std::vector<A> qkv_wide, sink_wide, block_wide;
    const A* q = as_compute(qkv_wide, qkv.data, qkv.type, rows * L.width());
    const A* sk = sink.data ? as_compute(sink_wide, sink.data, sink.type, dims.heads) : nullptr;
    forward_state<A> st;
    st.m.resize(std::size_t(rows * dims.heads));
    for (std::int64_t rh = 0; rh < rows * dims.heads; ++rh) st.m[std::size_t(rh)] = sink_of(sk, int(rh % dims.heads));
    st.l.assign(st.m.size(), sk ? A(1) : A(0));  // exp(sink - max) with the max at the sink
    st.o.assign(st.m.size() * std::size_t(hd), A(0));
    const std::size_t n = std::size_t(L.block_numel()), bytes = tensor::size_of(qkv.type);
    std::vector<std::byte> current(n * bytes), next(current.size());
    pack_block(current.data(), static_cast<const std::byte*>(qkv.data), L, rows, bytes);
    for (int step = 0; step < shard_.cp_size; ++step) {
      std::optional<timed_shift> shift;
      if (step + 1 < shard_.cp_size)
        shift.emplace(cp_, current.data(), next.data(), current.size(), timing_,
                      "KV block " + std::to_string(step + 1) + " of " + std::to_string(shard_.cp_size - 1) +
                          " from {peer} in ring attention");
      const auto start = clock_type::now();
      const int owner = (shard_.cp_rank - step + shard_.cp_size) % shard_.cp_size;
      forward_block(st, q, as_compute(block_wide, current.data(), qkv.type, std::int64_t(n)), owner, L, A(scale), drop,
                    shift ? shift->between() : ring_blocks::between_tiles{});
      timing_.compute_s += timed_transfer::seconds_since(start);
      if (shift) shift->wait(), std::swap(current, next);
    }
    // The last block (rank r + 1's) starts the backward's ring.
    std::memcpy(ensure_activation(last_block_, std::int64_t(n), 1, qkv.type).data, current.data(), current.size());
    A* ls = lse.host<A>().data();
    for (std::size_t rh = 0; rh < st.m.size(); ++rh) {
      for (std::int64_t c = 0; c < hd; ++c) st.o[rh * hd + c] /= st.l[rh];
      ls[rh] = st.m[rh] + std::log(st.l[rh]);
    }
    store(out, st.o);
  });
}

namespace {

// dsink[h] += -sum over this rank's rows of exp(sink - lse) * delta (the sink's probability times
// the row term), in dsink's dtype.
template <typename A>
void add_sink_gradient(tensor::tensor_view dsink, const A* sink, const backward_rows<A>& br, int heads) {
  std::vector<A> grad(std::size_t(heads), A(0)), scratch;
  for (std::size_t rh = 0; rh < br.delta.size(); ++rh) {
    const int h = int(rh % std::size_t(heads));
    grad[std::size_t(h)] -= std::exp(sink[h] - br.lse[rh]) * br.delta[rh];
  }
  const A* before = as_compute(scratch, dsink.data, dsink.type, heads);
  for (int h = 0; h < heads; ++h) grad[std::size_t(h)] += before[h];
  store(dsink, grad);
}

}  // namespace

void ring_attention::backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                              tensor::const_tensor_view qkv, tensor::const_tensor_view out,
                              tensor::const_tensor_view lse, const kernels::attention_dims& dims,
                              double scale, float dropout_p, std::uint64_t dropout_stream,
                              tensor::const_tensor_view sink, tensor::tensor_view dsink) {
  timing_ = {};
  const layout L{dims, shard_};
  const std::int64_t rows = std::int64_t(shard_.local_length()) * dims.batch, hd = dims.head_dim;
  const dropout_mask drop{dropout_p, dropout_stream, dims, std::uint64_t(shard_.seq_length)};
  const int cp = shard_.cp_size;
  // As the forward: 16-bit blocks widened to fp32; the gradients (the queries' here, the keys'
  // and values' around the ring) accumulate in fp32 and dqkv is rounded once at the end.
  kernels::dispatch_compute("ring_attention::backward", qkv.type, qkv.where, [&](auto zero) {
    using A = decltype(zero);
    std::vector<A> qkv_wide, dout_wide, out_wide, block_wide;
    const A* q = as_compute(qkv_wide, qkv.data, qkv.type, rows * L.width());
    const A* dor = as_compute(dout_wide, dout.data, dout.type, rows * dims.heads * hd);
    const A* o = as_compute(out_wide, out.data, out.type, rows * dims.heads * hd);
    backward_rows<A> br{lse.host<A>().data(), std::vector<A>(std::size_t(rows * dims.heads)),
                        std::vector<A>(std::size_t(rows * dims.heads * hd), A(0))};
    for (std::size_t rh = 0; rh < br.delta.size(); ++rh) br.delta[rh] = dot(dor + rh * hd, o + rh * hd, int(hd));
    // A message of the ring: a key/value block (the model's dtype), then the gradients of the
    // block the sender held one step before (the compute type). The ring runs backwards from
    // the forward's last block (rank r + 1's): at step s rank r holds rank r + 1 + s's block,
    // so the last step's is its own and every transfer overlaps a step's compute. The last
    // message carries the gradients alone: no one computes on the block it would bring.
    const std::size_t n = std::size_t(L.block_numel()), block_bytes = n * tensor::size_of(qkv.type);
    if (last_block_.numel() != std::int64_t(n) || last_block_.type() != qkv.type)
      throw std::logic_error("ring_attention::backward without the forward's last key/value block");
    std::vector<std::byte> current(block_bytes + n * sizeof(A)), next(current.size());
    const auto grads_of = [&](std::vector<std::byte>& m) { return reinterpret_cast<A*>(m.data() + block_bytes); };
    std::vector<A> part(n);
    std::memcpy(current.data(), last_block_.data(), block_bytes);
    for (int step = 0; step < cp; ++step) {
      std::optional<timed_shift> shift;
      const std::size_t skipped = step == cp - 1 ? block_bytes : 0;
      if (cp > 1)
        shift.emplace(cp_, current.data() + skipped, next.data() + skipped, current.size() - skipped, timing_,
                      "KV block and gradients " + std::to_string(step + 1) + " of " + std::to_string(cp) +
                          " from {peer} in ring attention's backward",
                      -1);
      const auto start = clock_type::now();
      std::fill(part.begin(), part.end(), A(0));
      backward_block(br, part.data(), dor, q, as_compute(block_wide, current.data(), qkv.type, std::int64_t(n)),
                     (shard_.cp_rank + 1 + step) % cp, L, A(scale), drop,
                     shift ? shift->between() : ring_blocks::between_tiles{});
      timing_.compute_s += timed_transfer::seconds_since(start);
      if (shift) shift->wait();
      // The received gradients (this block's, from the ranks it visited before) plus this
      // rank's share travel on with the next message; the block moves on too.
      A* accumulated = grads_of(shift ? next : current);
      for (std::size_t i = 0; i < n; ++i) accumulated[i] = (step > 0 ? accumulated[i] : A(0)) + part[i];
      if (shift) std::swap(current, next);
    }
    std::vector<A> dq(std::size_t(rows * L.width()));
    for (std::int64_t r = 0; r < rows; ++r)
      for (int h = 0; h < dims.heads; ++h)
        std::copy_n(br.dq.data() + L.row_head(r, h) * hd, hd, dq.data() + L.q_at(r, h));
    unpack_block(dq.data(), grads_of(current), L, rows);  // the last step's block: this rank's own
    store(dqkv, dq);
    if (sink.data && dsink.data) {
      std::vector<A> sink_wide;
      add_sink_gradient(dsink, as_compute(sink_wide, sink.data, sink.type, dims.heads), br, dims.heads);
    }
  });
}

}  // namespace mactor::model
