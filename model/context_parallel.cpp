// Context parallelism's sequence chunks, row placements and sequence all-gather.
#include "model/context_parallel.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/dropout.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/group.hpp"

namespace mactor::model {

std::vector<kernels::query_run> sequence_shard::runs() const {
  if (cp_size == 1) return {kernels::query_run{0, 0, seq_length}};
  const int chunk = seq_length / (2 * cp_size);
  return {kernels::query_run{0, cp_rank * chunk, chunk},
          kernels::query_run{chunk, (2 * cp_size - 1 - cp_rank) * chunk, chunk}};
}

std::vector<int> sequence_shard::positions() const {
  std::vector<int> out;
  out.reserve(std::size_t(local_length()));
  for (const auto& r : runs())
    for (int i = 0; i < r.length; ++i) out.push_back(r.global + i);
  return out;
}

row_placement::row_placement(const sequence_shard& shard, int batch, std::int64_t first_row,
                             std::int64_t rows) {
  const std::int64_t end = first_row + rows;
  for (const auto& r : shard.runs()) {
    const std::int64_t begin = std::max(first_row, std::int64_t(r.local) * batch);
    const std::int64_t stop = std::min(end, std::int64_t(r.local + r.length) * batch);
    if (begin >= stop) continue;
    spans_.push_back({begin - first_row, std::int64_t(r.global) * batch + (begin - std::int64_t(r.local) * batch),
                      stop - begin});
  }
}

void row_placement::dropout_apply(tensor::tensor_view y, tensor::const_tensor_view x, int hidden,
                                  float p, std::uint64_t stream) const {
  for (const auto& s : spans_)
    kernels::dropout_apply(elements(y, s.row * hidden, s.rows * hidden),
                           elements(x, s.row * hidden, s.rows * hidden), s.rows * hidden, p, stream,
                           std::uint64_t(s.global_row) * hidden);
}

void row_placement::bias_dropout_add(tensor::tensor_view out, tensor::const_tensor_view residual,
                                     tensor::const_tensor_view x, tensor::const_tensor_view bias,
                                     int hidden, float p, std::uint64_t stream) const {
  for (const auto& s : spans_)
    kernels::bias_dropout_add(elements(out, s.row * hidden, s.rows * hidden),
                              elements(residual, s.row * hidden, s.rows * hidden),
                              elements(x, s.row * hidden, s.rows * hidden), bias, int(s.rows), hidden,
                              p, stream, std::uint64_t(s.global_row) * hidden);
}

namespace {

// Calls f(offset in the rank-major buffer, offset in the sequence-order buffer, count) for
// every chunk of every rank; offsets and counts in elements.
template <typename F>
void for_each_chunk(const sequence_shard& shard, int batch, std::int64_t width, F&& f) {
  const std::int64_t per_position = std::int64_t(batch) * width;
  const std::int64_t local_numel = std::int64_t(shard.local_length()) * per_position;
  for (int r = 0; r < shard.cp_size; ++r) {
    const sequence_shard other{shard.seq_length, shard.cp_size, r};
    for (const auto& run : other.runs())
      f(r * local_numel + run.local * per_position, run.global * per_position, run.length * per_position);
  }
}

void check_sizes(const char* what, const sequence_shard& shard, int batch,
                 tensor::const_tensor_view local, tensor::const_tensor_view full) {
  if (full.numel() != local.numel() * shard.cp_size || local.numel() % (std::int64_t(shard.local_length()) * batch) != 0)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(local.numel()) +
                                " local elements and " + std::to_string(full.numel()) +
                                " in the whole sequence do not fit " + std::to_string(shard.cp_size) +
                                " ranks of " + std::to_string(shard.local_length()) + " positions");
}

}  // namespace

void gather_sequence_values(group& cp, const sequence_shard& shard, int batch, const void* local, std::size_t element,
                            void* whole) {
  const std::size_t ranks = std::size_t(shard.cp_size), row = element * std::size_t(batch);
  const std::size_t block = std::size_t(shard.local_length()) * row;
  std::vector<std::byte> send(block * ranks), recv(block * ranks);
  for (std::size_t q = 0; q < ranks; ++q) std::memcpy(send.data() + q * block, local, block);
  const std::vector<std::size_t> counts(ranks, block);
  cp.all_to_all_v_bytes(send.data(), counts, recv.data(), counts);
  auto* out = static_cast<std::byte*>(whole);
  for (int q = 0; q < shard.cp_size; ++q) {
    const sequence_shard theirs{shard.seq_length, shard.cp_size, q};
    const auto positions = theirs.positions();
    for (std::size_t i = 0; i < positions.size(); ++i)
      std::memcpy(out + std::size_t(positions[i]) * row, recv.data() + std::size_t(q) * block + i * row, row);
  }
}

void gather_sequence(group& cp, const sequence_shard& shard, int batch,
                     tensor::const_tensor_view local, tensor::tensor_view full) {
  check_sizes("gather_sequence", shard, batch, local, full);
  const std::int64_t width = local.numel() / (std::int64_t(shard.local_length()) * batch);
  tensor::tensor gathered({full.numel()}, full.type, tensor::memory_kind::communication, full.where);
  cp.all_gather(local, gathered);
  for_each_chunk(shard, batch, width, [&](std::int64_t at, std::int64_t to, std::int64_t n) {
    kernels::copy(elements(full, to, n), elements(gathered.view(), at, n));
  });
}

void reduce_scatter_sequence(group& cp, const sequence_shard& shard, int batch,
                             tensor::const_tensor_view full, tensor::tensor_view local) {
  check_sizes("reduce_scatter_sequence", shard, batch, local, full);
  const std::int64_t width = local.numel() / (std::int64_t(shard.local_length()) * batch);
  tensor::tensor rank_major({full.numel()}, full.type, tensor::memory_kind::communication, full.where);
  for_each_chunk(shard, batch, width, [&](std::int64_t at, std::int64_t from, std::int64_t n) {
    kernels::copy(elements(rank_major.view(), at, n), elements(full, from, n));
  });
  cp.reduce_scatter_sum(rank_major, local);
}

}  // namespace mactor::model
