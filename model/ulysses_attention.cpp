// Ulysses attention's two all-to-all exchanges and the attention kernel between them.
#include "model/ulysses_attention.hpp"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/activation.hpp"
#include "model/group.hpp"
#include "tensor/through_host.hpp"

namespace mactor::model {
namespace {

// Byte arithmetic of an exchange over g: R local rows of U units of w elements, u = U / g.size()
// per member; member m holds context-parallel rank `first + m`'s positions.
struct exchange_shape {
  const sequence_shard& shard;
  std::vector<int> target_row;  // a position's row in the target's order (-1: not the target's)
  int target_length;            // the target's positions
  int members, first;
  int batch;
  std::int64_t units, unit_width;
  std::size_t element;  // bytes
  std::int64_t rows() const { return std::int64_t(shard.local_length()) * batch; }
  std::int64_t per_rank_units() const { return units / members; }
  std::size_t slice_bytes() const { return std::size_t(per_rank_units() * unit_width) * element; }
  std::size_t block_bytes() const { return std::size_t(rows()) * slice_bytes(); }
};

exchange_shape shape_of(const group& g, const sequence_shard& shard, const sequence_shard& target, int batch,
                        std::int64_t units, std::int64_t unit_width, std::size_t element) {
  std::vector<int> target_row(std::size_t(shard.seq_length), -1);
  const auto positions = target.positions();
  for (std::size_t i = 0; i < positions.size(); ++i) target_row[std::size_t(positions[i])] = int(i);
  return {shard, std::move(target_row), target.local_length(), g.size(), shard.cp_rank - g.rank(), batch, units, unit_width, element};
}

// Calls f(member's local row, its row in the target's order) for every row member `owner` holds.
template <typename F>
void for_each_row_of(const exchange_shape& s, int owner, F&& f) {
  const sequence_shard other{s.shard.seq_length, s.shard.cp_size, s.first + owner};
  for (const auto& run : other.runs())
    for (int i = 0; i < run.length; ++i)
      for (int b = 0; b < s.batch; ++b)
        f(std::int64_t(run.local + i) * s.batch + b, std::int64_t(s.target_row[std::size_t(run.global + i)]) * s.batch + b);
}

void exchange_equal_blocks(group& g, const exchange_shape& s, const std::byte* send, std::byte* recv) {
  const std::vector<std::size_t> counts(std::size_t(s.members), s.block_bytes());
  g.all_to_all_v_bytes(send, counts, recv, counts);
}

void check_units(const char* what, const exchange_shape& s, tensor::const_tensor_view local,
                 tensor::const_tensor_view heads) {
  const std::int64_t numel = s.rows() * s.units * s.unit_width;
  if (s.units % s.members != 0 || local.numel() != numel || heads.numel() != numel ||
      s.target_length != s.members * s.shard.local_length())
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(s.units) + " units of " +
                                std::to_string(s.unit_width) + " do not split over " + std::to_string(s.members) +
                                " context-parallel ranks for these tensors");
}

}  // namespace

void sequence_to_heads(group& g, const sequence_shard& shard, const sequence_shard& target, int batch,
                       std::int64_t units, std::int64_t unit_width, tensor::const_tensor_view in,
                       tensor::tensor_view out) {
  if (in.where != tensor::cpu)  // the exchange moves host memory (as the collectives do): on host copies
    return tensor::through_host(in, out, false, [&](tensor::const_tensor_view host_in, tensor::tensor_view host_out) {
      sequence_to_heads(g, shard, target, batch, units, unit_width, host_in, host_out);
    });
  const auto s = shape_of(g, shard, target, batch, units, unit_width, tensor::size_of(in.type));
  check_units("sequence_to_heads", s, in, out);
  const int ranks = s.members;
  const std::size_t slice = s.slice_bytes(), row = slice * std::size_t(ranks);
  std::vector<std::byte> send(s.block_bytes() * std::size_t(ranks)), recv(send.size());
  const auto* from = static_cast<const std::byte*>(in.data);
  for (int j = 0; j < ranks; ++j)
    for (std::int64_t r = 0; r < s.rows(); ++r)
      std::memcpy(send.data() + (std::size_t(j) * std::size_t(s.rows()) + std::size_t(r)) * slice,
                  from + std::size_t(r) * row + std::size_t(j) * slice, slice);
  exchange_equal_blocks(g, s, send.data(), recv.data());
  auto* to = static_cast<std::byte*>(out.data);
  for (int i = 0; i < ranks; ++i)
    for_each_row_of(s, i, [&](std::int64_t local, std::int64_t at) {
      std::memcpy(to + std::size_t(at) * slice,
                  recv.data() + (std::size_t(i) * std::size_t(s.rows()) + std::size_t(local)) * slice, slice);
    });
}

void heads_to_sequence(group& g, const sequence_shard& shard, const sequence_shard& target, int batch,
                       std::int64_t units, std::int64_t unit_width, tensor::const_tensor_view in,
                       tensor::tensor_view out) {
  if (in.where != tensor::cpu)
    return tensor::through_host(in, out, false, [&](tensor::const_tensor_view host_in, tensor::tensor_view host_out) {
      heads_to_sequence(g, shard, target, batch, units, unit_width, host_in, host_out);
    });
  const auto s = shape_of(g, shard, target, batch, units, unit_width, tensor::size_of(in.type));
  check_units("heads_to_sequence", s, out, in);
  const int ranks = s.members;
  const std::size_t slice = s.slice_bytes(), row = slice * std::size_t(ranks);
  std::vector<std::byte> send(s.block_bytes() * std::size_t(ranks)), recv(send.size());
  const auto* from = static_cast<const std::byte*>(in.data);
  for (int j = 0; j < ranks; ++j)
    for_each_row_of(s, j, [&](std::int64_t local, std::int64_t at) {
      std::memcpy(send.data() + (std::size_t(j) * std::size_t(s.rows()) + std::size_t(local)) * slice,
                  from + std::size_t(at) * slice, slice);
    });
  exchange_equal_blocks(g, s, send.data(), recv.data());
  auto* to = static_cast<std::byte*>(out.data);
  for (int i = 0; i < ranks; ++i)
    for (std::int64_t r = 0; r < s.rows(); ++r)
      std::memcpy(to + std::size_t(r) * row + std::size_t(i) * slice,
                  recv.data() + (std::size_t(i) * std::size_t(s.rows()) + std::size_t(r)) * slice, slice);
}

ulysses_attention::ulysses_attention(group& cp, const sequence_shard& shard, int groups) : cp_(cp), shard_(shard) {
  if (groups % shard.cp_size != 0)
    throw std::invalid_argument("--cp-comm-type a2a needs the query groups per tensor-parallel rank (" +
                                std::to_string(groups) + ") divisible by --context-parallel-size=" +
                                std::to_string(shard.cp_size));
}

kernels::attention_dims head_shard_dims(const kernels::attention_dims& local, int shards, int index, int seq) {
  kernels::attention_dims d = local;
  d.heads = local.heads / shards;
  d.groups = local.groups / shards;
  d.head_offset = local.head_offset + index * d.heads;
  d.seq = seq;
  d.kv_seq = 0;
  d.num_runs = 0;
  return d;
}

kernels::attention_dims ulysses_attention::head_dims(const kernels::attention_dims& local) const {
  return head_shard_dims(local, shard_.cp_size, shard_.cp_rank, shard_.seq_length);
}

void ulysses_attention::forward(tensor::tensor_view out, tensor::const_tensor_view qkv,
                                const kernels::attention_dims& dims, double scale, float dropout_p,
                                std::uint64_t dropout_stream, tensor::const_tensor_view sink) {
  const auto d = head_dims(dims);
  const std::int64_t rows = std::int64_t(d.seq) * d.batch;
  const std::int64_t group_width = std::int64_t(dims.heads / dims.groups + 2) * d.head_dim;
  auto heads_qkv = ensure_activation(qkv_heads_, rows, d.qkv_width(), qkv.type);
  sequence_to_heads(cp_, shard_, d.batch, dims.groups, group_width, qkv, heads_qkv);
  auto probs = ensure_activation(probs_, std::int64_t(d.batch) * d.heads * d.seq, d.seq, qkv.type);
  tensor::tensor context({rows, std::int64_t(d.heads) * d.head_dim}, qkv.type, tensor::memory_kind::activations,
                         qkv.where);
  const auto my_sink = sink.data ? elements(sink, std::int64_t(shard_.cp_rank) * d.heads, d.heads) : sink;
  kernels::attention_forward(context, probs, heads_qkv, d, scale, dropout_p, dropout_stream, my_sink);
  heads_to_sequence(cp_, shard_, d.batch, dims.heads, d.head_dim, context, out);
}

void ulysses_attention::backward(tensor::tensor_view dqkv, tensor::const_tensor_view dout,
                                 const kernels::attention_dims& dims, double scale, float dropout_p,
                                 std::uint64_t dropout_stream, tensor::const_tensor_view sink,
                                 tensor::tensor_view dsink) {
  const auto d = head_dims(dims);
  const std::int64_t rows = std::int64_t(d.seq) * d.batch;
  const std::int64_t group_width = std::int64_t(dims.heads / dims.groups + 2) * d.head_dim;
  tensor::tensor heads_dout({rows, std::int64_t(d.heads) * d.head_dim}, dout.type, tensor::memory_kind::activations,
                            dout.where);
  sequence_to_heads(cp_, shard_, d.batch, dims.heads, d.head_dim, dout, heads_dout);
  tensor::tensor heads_dqkv({rows, d.qkv_width()}, dout.type, tensor::memory_kind::activations, dout.where);
  const auto at = std::int64_t(shard_.cp_rank) * d.heads;
  const auto my_sink = sink.data ? elements(sink, at, d.heads) : sink;
  const auto my_dsink = dsink.data && sink.data ? elements(dsink, at, d.heads) : tensor::tensor_view{};
  kernels::attention_backward(heads_dqkv, heads_dout, qkv_heads_, probs_, d, scale, dropout_p, dropout_stream,
                              my_sink, my_dsink);
  heads_to_sequence(cp_, shard_, d.batch, dims.groups, group_width, heads_dqkv, dqkv);
}

void ulysses_attention::release() {
  qkv_heads_ = tensor::tensor();
  probs_ = tensor::tensor();
}

}  // namespace mactor::model
