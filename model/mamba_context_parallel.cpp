// The Mamba mixer's context-parallel exchanges and parameter slices.
#include "model/mamba_context_parallel.hpp"

#include <stdexcept>
#include <string>

#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/mamba_layout.hpp"
#include "model/ulysses_attention.hpp"

namespace mactor::model {
namespace {

constexpr auto sb = row_order::seq_batch;

int checked_size(group* cp, const sequence_shard& shard, int heads, int groups) {
  const int size = shard.cp_size;
  if (heads % size != 0)
    throw std::invalid_argument("nheads must be evenly divisible by tp_size * cp_size: the Mamba heads per "
                                "tensor-parallel rank (" + std::to_string(heads) + ") and --context-parallel-size " +
                                std::to_string(size));
  if (groups < size ? size % groups != 0 : groups % size != 0)
    throw std::invalid_argument("the Mamba groups per tensor-parallel rank (" + std::to_string(groups) +
                                ") must divide --context-parallel-size " + std::to_string(size) +
                                " or be a multiple of it (Megatron's 'cp_size must be evenly divisible by "
                                "ngroups/tp_size' / 'ngroups must be evenly divisible by tp_size * cp_size')");
  if (size > 1 && (!cp || cp->size() != size))
    throw std::invalid_argument("the Mamba mixer's context-parallel group must hold --context-parallel-size ranks");
  return size;
}

}  // namespace

mamba_context_parallel::mamba_context_parallel(group* cp, const sequence_shard& shard, int heads, int groups,
                                               int head_dim, int state)
    : cp_(cp), shard_(shard), size_(checked_size(cp, shard, heads, groups)), rank_(shard.cp_rank), heads_(heads),
      groups_(groups), head_dim_(head_dim), state_(state) {}

mamba_context_parallel::exchange mamba_context_parallel::exchange_of(part kind) const {
  switch (kind) {
    case part::x: return {heads_, head_dim_, 1};
    case part::dt: return {heads_, 1, 1};
    case part::bc: break;
  }
  // Each group repeated before the next, so its replicas land on consecutive ranks with its heads.
  const int repeat = groups_ < size_ ? size_ / groups_ : 1;
  return {std::int64_t(groups_) * repeat, state_, repeat};
}

void mamba_context_parallel::to_heads(part kind, int batch, tensor::const_tensor_view local,
                                      tensor::tensor_view whole) const {
  const auto e = exchange_of(kind);
  if (e.repeat == 1) {
    sequence_to_heads(*cp_, shard_, batch, e.units, e.width, local, whole);
    return;
  }
  const int rows = shard_.local_length() * batch, width = int(e.units * e.width), n = state_;
  tensor::tensor repeated({rows, width}, local.type, tensor::memory_kind::activations, local.where);
  for (int g = 0; g < groups_; ++g)
    for (int j = 0; j < e.repeat; ++j)
      copy_columns(repeated.view(), {sb, width, (g * e.repeat + j) * n}, local, {sb, groups_ * n, g * n}, n, rows, 1);
  sequence_to_heads(*cp_, shard_, batch, e.units, e.width, repeated.view(), whole);
}

void mamba_context_parallel::to_sequence(part kind, int batch, tensor::const_tensor_view whole,
                                         tensor::tensor_view local) const {
  const auto e = exchange_of(kind);
  if (e.repeat == 1) {
    heads_to_sequence(*cp_, shard_, batch, e.units, e.width, whole, local);
    return;
  }
  const int rows = shard_.local_length() * batch, width = int(e.units * e.width), n = state_;
  tensor::tensor repeated({rows, width}, local.type, tensor::memory_kind::activations, local.where);
  heads_to_sequence(*cp_, shard_, batch, e.units, e.width, whole, repeated.view());
  tensor::tensor sum({rows, n}, local.type, tensor::memory_kind::activations, local.where);
  tensor::tensor replica({rows, n}, local.type, tensor::memory_kind::activations, local.where);
  for (int g = 0; g < groups_; ++g) {
    copy_columns(sum.view(), {sb, n, 0}, repeated.view(), {sb, width, g * e.repeat * n}, n, rows, 1);
    for (int j = 1; j < e.repeat; ++j) {
      copy_columns(replica.view(), {sb, n, 0}, repeated.view(), {sb, width, (g * e.repeat + j) * n}, n, rows, 1);
      kernels::add(sum.view(), replica.view());
    }
    copy_columns(local, {sb, groups_ * n, g * n}, sum.view(), {sb, n, 0}, n, rows, 1);
  }
}

std::array<mamba_context_parallel::rows_run, 3> mamba_context_parallel::conv_runs() const {
  const std::int64_t di = std::int64_t(heads_) * head_dim_, gn = std::int64_t(groups_) * state_;
  const std::int64_t mine_gn = std::int64_t(groups()) * state_;
  const int repeat = groups_ < size_ ? size_ / groups_ : 1;
  const std::int64_t group_block = (rank_ / repeat) * mine_gn;
  return {{{rank_ * std::int64_t(d_inner()), d_inner()}, {di + group_block, mine_gn}, {di + gn + group_block, mine_gn}}};
}

void mamba_context_parallel::gather_conv_rows(tensor::const_tensor_view full, tensor::tensor_view slice,
                                              int row_width) const {
  std::int64_t at = 0;
  for (const auto& run : conv_runs()) {
    kernels::copy(elements(slice, at * row_width, run.count * row_width),
                  elements(full, run.begin * row_width, run.count * row_width));
    at += run.count;
  }
}

void mamba_context_parallel::add_conv_rows(tensor::tensor_view full, tensor::const_tensor_view slice,
                                           int row_width) const {
  std::int64_t at = 0;
  for (const auto& run : conv_runs()) {
    kernels::add(elements(full, run.begin * row_width, run.count * row_width),
                 elements(slice, at * row_width, run.count * row_width));
    at += run.count;
  }
}

}  // namespace mactor::model
