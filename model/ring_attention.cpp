// Ring attention's driver (kernels/ring_attention_block.hpp holds a block step's math).
#include "model/ring_attention.hpp"

#include <algorithm>
#include <array>
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
#include "kernels/moe_permute.hpp"
#include "kernels/ring_attention_block.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/group.hpp"
#include "model/host_exchange.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {
namespace {

using clock_type = timed_transfer::clock;

// The positions of one rank's two chunks (or the whole sequence at cp = 1) as the kernel reads them.
void place(std::array<kernels::query_run, 2>& runs, int& count, const sequence_shard& s) {
  const auto all = s.runs();
  if (all.size() > runs.size()) throw std::logic_error("ring attention: a rank holds more than two chunks");
  count = int(all.size());
  std::copy(all.begin(), all.end(), runs.begin());
}

// The block step's dims: this rank's queries against `owner`'s keys and values.
kernels::ring_block_dims block_dims(const kernels::attention_dims& d, const sequence_shard& shard, int owner) {
  kernels::ring_block_dims r;
  r.d = d;
  r.local_length = shard.local_length();
  r.seq_length = shard.seq_length;
  place(r.queries, r.num_queries, shard);
  place(r.keys, r.num_keys, {shard.seq_length, shard.cp_size, owner});
  return r;
}

// qkv as rows of head_dim elements ("units"): per (row, group) the key's then the value's, in a
// block's order (gather them to pack a block, scatter-add a block's gradients back); per (row,
// head) the query's, in the [rows, heads, head_dim] order of the queries' gradient.
std::vector<std::int64_t> key_value_units(const kernels::ring_block_dims& r) {
  std::vector<std::int64_t> units;
  units.reserve(std::size_t(r.rows() * r.d.groups * 2));
  for (std::int64_t row = 0; row < r.rows(); ++row)
    for (int g = 0; g < r.d.groups; ++g) {
      const std::int64_t k = r.k_at(row, g) / r.d.head_dim;
      units.push_back(k), units.push_back(k + 1);
    }
  return units;
}
std::vector<std::int64_t> query_units(const kernels::ring_block_dims& r) {
  std::vector<std::int64_t> units;
  units.reserve(std::size_t(r.rows() * r.d.heads));
  for (std::int64_t row = 0; row < r.rows(); ++row)
    for (int h = 0; h < r.d.heads; ++h) units.push_back(r.q_at(row, h) / r.d.head_dim);
  return units;
}

// v's elements in host memory as A (widened from a 16-bit dtype), from wherever v is.
template <typename A>
std::vector<A> host_values(tensor::const_tensor_view v) {
  std::vector<A> out(std::size_t(v.numel()));
  convert_across(tensor::view_of(std::span<A>(out)), v);
  return out;
}

// One message of the ring: a key/value block (the model's dtype) and, in the backward, the
// gradients of the block the sender held one step before (the compute type) after it. On the
// host both are views into the bytes the transport moves; on a device they are device tensors,
// copied into and out of host bytes of the same layout around each shift (the transports move
// host memory).
class ring_message {
 public:
  ring_message(std::int64_t n, tensor::dtype block_type, std::optional<tensor::dtype> grad_type, tensor::device where)
      : n_(n), block_type_(block_type), grad_type_(grad_type), where_(where),
        block_bytes_(std::size_t(n) * tensor::size_of(block_type)),
        bytes_(block_bytes_ + (grad_type ? std::size_t(n) * tensor::size_of(*grad_type) : 0)) {
    if (where == tensor::cpu) return;
    block_ = tensor::tensor({n}, block_type, tensor::memory_kind::activations, where);
    if (grad_type) grads_ = tensor::tensor({n}, *grad_type, tensor::memory_kind::activations, where);
  }
  tensor::tensor_view block() {
    return where_ == tensor::cpu ? tensor::tensor_view(bytes_.data(), {n_}, block_type_) : block_.view();
  }
  tensor::tensor_view grads() {
    return where_ == tensor::cpu ? tensor::tensor_view(bytes_.data() + block_bytes_, {n_}, *grad_type_) : grads_.view();
  }
  std::size_t block_bytes() const { return block_bytes_; }
  /// The host bytes a shift sends from or receives into (for a device message, after
  /// to_host() or before from_host()).
  std::span<std::byte> bytes() { return bytes_; }
  /// A device message's parts into its host bytes, and back (the block's too unless skipped).
  void to_host() {
    if (where_ == tensor::cpu) return;
    tensor::copy_between(tensor::tensor_view(bytes_.data(), {n_}, block_type_), block_.view());
    if (grad_type_) tensor::copy_between(tensor::tensor_view(bytes_.data() + block_bytes_, {n_}, *grad_type_), grads_.view());
  }
  void from_host(bool with_block = true) {
    if (where_ == tensor::cpu) return;
    if (with_block) tensor::copy_between(block_.view(), tensor::tensor_view(bytes_.data(), {n_}, block_type_));
    if (grad_type_) tensor::copy_between(grads_.view(), tensor::tensor_view(bytes_.data() + block_bytes_, {n_}, *grad_type_));
  }

 private:
  std::int64_t n_;
  tensor::dtype block_type_;
  std::optional<tensor::dtype> grad_type_;
  tensor::device where_;
  std::size_t block_bytes_;
  std::vector<std::byte> bytes_;
  tensor::tensor block_, grads_;
};

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
  kernels::between_tiles between() {
    return [this] { poll(); };
  }

 private:
  ring_timing& timing_;
  clock_type::time_point start_;
  std::unique_ptr<pending_shift> pending_;
  bool done_ = false;
};

template <typename T>
T sink_of(const std::vector<T>& sink, int h) {
  return sink.empty() ? -std::numeric_limits<T>::infinity() : sink[std::size_t(h)];
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
  const int cp = shard_.cp_size;
  const auto own = block_dims(dims, shard_, shard_.cp_rank);
  const std::int64_t row_heads = own.rows() * dims.heads, hd = dims.head_dim, n = own.block_numel();
  const tensor::device where = qkv.where;
  const tensor::dtype compute = kernels::compute_dtype(qkv.type);
  // A 16-bit model's blocks travel in 16 bits and are widened to fp32 to compute on; the running
  // max, sum and output stay in the compute type until the output is rounded once at the end.
  tensor::tensor m({row_heads}, compute, tensor::memory_kind::activations, where);
  tensor::tensor l({row_heads}, compute, tensor::memory_kind::activations, where);
  tensor::tensor o({row_heads * hd}, compute, tensor::memory_kind::activations, where);
  kernels::dispatch_compute("ring_attention::forward", qkv.type, tensor::cpu, [&](auto zero) {
    using A = decltype(zero);
    const std::vector<A> sk = sink.data ? host_values<A>(sink) : std::vector<A>{};
    const auto count = std::size_t(row_heads);
    std::vector<A> m0(count), l0(count, sk.empty() ? A(0) : A(1));  // exp(sink - max) at the sink
    for (std::int64_t rh = 0; rh < row_heads; ++rh) m0[std::size_t(rh)] = sink_of(sk, int(rh % dims.heads));
    tensor::copy_between(m.view(), tensor::view_of(std::span<const A>(m0)));
    tensor::copy_between(l.view(), tensor::view_of(std::span<const A>(l0)));
  });
  ring_message current(n, qkv.type, std::nullopt, where), next(n, qkv.type, std::nullopt, where);
  kernels::gather_rows(current.block(), qkv, key_value_units(own), int(hd));
  for (int step = 0; step < cp; ++step) {
    std::optional<timed_shift> shift;
    if (step + 1 < cp) {
      current.to_host();
      shift.emplace(cp_, current.bytes().data(), next.bytes().data(), current.bytes().size(), timing_,
                    "KV block " + std::to_string(step + 1) + " of " + std::to_string(cp - 1) +
                        " from {peer} in ring attention");
    }
    const auto start = clock_type::now();
    const int owner = (shard_.cp_rank - step + cp) % cp;
    kernels::ring_block_forward(m, l, o, qkv, current.block(), block_dims(dims, shard_, owner), scale, dropout_p,
                                dropout_stream, shift ? shift->between() : kernels::between_tiles{});
    timing_.compute_s += timed_transfer::seconds_since(start);
    if (shift) shift->wait(), next.from_host(), std::swap(current, next);
  }
  // The last block (rank r + 1's) starts the backward's ring.
  if (last_block_.numel() != n || last_block_.type() != qkv.type || last_block_.where() != where)
    last_block_ = tensor::tensor({n}, qkv.type, tensor::memory_kind::activations, where);
  kernels::copy(last_block_, current.block());
  // lse = m + log l and the output o / l, the per-row values made on the host.
  kernels::dispatch_compute("ring_attention::forward", qkv.type, tensor::cpu, [&](auto zero) {
    using A = decltype(zero);
    const auto mh = tensor::host_copy<A>(m), lh = tensor::host_copy<A>(l);
    std::vector<A> ls(mh.size()), inverse(mh.size());
    for (std::size_t rh = 0; rh < mh.size(); ++rh) ls[rh] = mh[rh] + std::log(lh[rh]), inverse[rh] = A(1) / lh[rh];
    tensor::copy_between(lse, tensor::view_of(std::span<const A>(ls)));
    tensor::copy_between(l.view(), tensor::view_of(std::span<const A>(inverse)));
  });
  kernels::scale_rows(o, o, l, row_heads, int(hd));
  kernels::convert(tensor::tensor_view(out.data, {row_heads * hd}, out.type, out.where), o);
}

namespace {

// dsink[h] += -sum over this rank's rows of exp(sink - lse) * delta (the sink's probability times
// the row term), in dsink's dtype; the per-row values come to the host.
template <typename A>
void add_sink_gradient(tensor::tensor_view dsink, tensor::const_tensor_view sink, tensor::const_tensor_view lse,
                       tensor::const_tensor_view delta, int heads) {
  const auto s = host_values<A>(sink), ls = tensor::host_copy<A>(lse), dl = tensor::host_copy<A>(delta);
  std::vector<A> grad(std::size_t(heads), A(0));
  for (std::size_t rh = 0; rh < dl.size(); ++rh) {
    const int h = int(rh % std::size_t(heads));
    grad[std::size_t(h)] -= std::exp(s[std::size_t(h)] - ls[rh]) * dl[rh];
  }
  const auto before = host_values<A>(dsink);
  for (int h = 0; h < heads; ++h) grad[std::size_t(h)] += before[std::size_t(h)];
  convert_across(dsink, tensor::view_of(std::span<const A>(grad)));  // rounded once to dsink's dtype
}

}  // namespace

void ring_attention::backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                              tensor::const_tensor_view qkv, tensor::const_tensor_view out,
                              tensor::const_tensor_view lse, const kernels::attention_dims& dims,
                              double scale, float dropout_p, std::uint64_t dropout_stream,
                              tensor::const_tensor_view sink, tensor::tensor_view dsink) {
  timing_ = {};
  const int cp = shard_.cp_size;
  const auto own = block_dims(dims, shard_, shard_.cp_rank);
  const std::int64_t row_heads = own.rows() * dims.heads, hd = dims.head_dim, n = own.block_numel();
  const tensor::device where = qkv.where;
  const tensor::dtype compute = kernels::compute_dtype(qkv.type);
  if (last_block_.numel() != n || last_block_.type() != qkv.type)
    throw std::logic_error("ring_attention::backward without the forward's last key/value block");
  // As the forward: 16-bit blocks widened to fp32; the gradients (the queries' here, the keys'
  // and values' around the ring) accumulate in fp32 and dqkv is rounded once at the end.
  tensor::tensor delta({row_heads}, compute, tensor::memory_kind::activations, where);
  kernels::row_dots(delta, dout, out, row_heads, int(hd));
  tensor::tensor dq({row_heads * hd}, compute, tensor::memory_kind::activations, where);
  tensor::tensor part({n}, compute, tensor::memory_kind::activations, where);
  // A message of the ring: a key/value block, then the gradients of the block the sender held
  // one step before. The ring runs backwards from the forward's last block (rank r + 1's): at
  // step s rank r holds rank r + 1 + s's block, so the last step's is its own and every transfer
  // overlaps a step's compute. The last message carries the gradients alone: no one computes on
  // the block it would bring.
  ring_message current(n, qkv.type, compute, where), next(n, qkv.type, compute, where);
  kernels::copy(current.block(), last_block_);
  for (int step = 0; step < cp; ++step) {
    std::optional<timed_shift> shift;
    const bool last = step == cp - 1;
    const std::size_t skipped = last ? current.block_bytes() : 0;
    if (cp > 1) {
      current.to_host();
      shift.emplace(cp_, current.bytes().data() + skipped, next.bytes().data() + skipped,
                    current.bytes().size() - skipped, timing_,
                    "KV block and gradients " + std::to_string(step + 1) + " of " + std::to_string(cp) +
                        " from {peer} in ring attention's backward",
                    -1);
    }
    const auto start = clock_type::now();
    kernels::fill_zero(part);
    kernels::ring_block_backward(dq, part, dout, qkv, current.block(), lse, delta,
                                 block_dims(dims, shard_, (shard_.cp_rank + 1 + step) % cp), scale, dropout_p,
                                 dropout_stream, shift ? shift->between() : kernels::between_tiles{});
    timing_.compute_s += timed_transfer::seconds_since(start);
    if (shift) shift->wait(), next.from_host(!last);
    // The received gradients (this block's, from the ranks it visited before) plus this
    // rank's share travel on with the next message; the block moves on too.
    ring_message& arrived = shift ? next : current;
    if (step > 0) kernels::add(arrived.grads(), part);
    else kernels::copy(arrived.grads(), part);
    if (shift) std::swap(current, next);
  }
  // dqkv: the queries' gradients and this rank's own block's (the last step's), each element
  // written once into zeros, rounded once to dqkv's dtype.
  tensor::tensor wide({own.rows() * own.qkv_width()}, compute, tensor::memory_kind::activations, where);
  kernels::scatter_add_rows(wide, dq, query_units(own), int(hd));
  kernels::scatter_add_rows(wide, current.grads(), key_value_units(own), int(hd));
  kernels::convert(tensor::tensor_view(dqkv.data, {wide.numel()}, dqkv.type, dqkv.where), wide);
  if (sink.data && dsink.data)
    kernels::dispatch_compute("ring_attention::backward", qkv.type, tensor::cpu, [&](auto zero) {
      add_sink_gradient<decltype(zero)>(dsink, sink, lse, delta, dims.heads);
    });
}

}  // namespace mactor::model
