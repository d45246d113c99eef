// A rank's parameters as checkpoint pieces (see checkpoint_pieces.hpp).
#include "training/checkpoint_pieces.hpp"

#include <algorithm>

namespace mactor::training {

using checkpoint::tensor_piece;
using json = nlohmann::json;

namespace {

// One contiguous run of a rank's local tensor that is one nd slice of the global tensor.
struct segment {
  std::vector<std::int64_t> offset, shape;
  std::size_t local_begin = 0, numel = 0;
};

// The local (tensor-parallel shard) tensor of p as slices of its global tensor, in local order.
std::vector<segment> segments_of(const model::parameter& p, int t, int tp) {
  const auto& full = p.full_shape;
  const auto local = model::shard_shape(full, p.split, tp);
  std::vector<std::int64_t> zero(full.size(), 0);
  switch (p.split) {
    case model::tp_split::replicated:
      return {{zero, full, 0, p.numel}};
    case model::tp_split::rows: {
      auto off = zero;
      off[0] = t * local[0];
      return {{off, local, 0, p.numel}};
    }
    case model::tp_split::columns: {
      auto off = zero;
      off[1] = t * local[1];
      return {{off, local, 0, p.numel}};
    }
    case model::tp_split::row_halves: {
      // [gate; up] of 2F rows: this rank's gate block, then its up block.
      const std::int64_t half = full[0] / 2, rows = local[0] / 2;
      auto shape = local;
      shape[0] = rows;
      const std::size_t n = p.numel / 2;
      auto gate = zero, up = zero;
      gate[0] = t * rows;
      up[0] = half + t * rows;
      return {{gate, shape, 0, n}, {up, shape, n, n}};
    }
    case model::tp_split::row_segments: {
      // The Mamba mixer's [z; x; B; C; dt]: this rank's block of rows of each segment, in order.
      std::vector<segment> out;
      std::int64_t first = 0;
      std::size_t at = 0;
      const std::size_t row_numel = p.numel / std::size_t(local[0]);
      for (const auto rows : p.segments) {
        auto off = zero, shape = local;
        shape[0] = rows / tp;
        off[0] = first + t * shape[0];
        const std::size_t n = std::size_t(shape[0]) * row_numel;
        out.push_back({off, shape, at, n});
        first += rows, at += n;
      }
      return out;
    }
  }
  return {};
}

}  // namespace

// Pieces covering elements [begin, end) of p's local tensor, with data from `local` (indexed
// from the local tensor's start); `local` may be null for load requests.
std::vector<tensor_piece> pieces_of(const std::string& name, const model::parameter& p, int t, int tp,
                                    std::size_t begin, std::size_t end, const float* local,
                                    checkpoint::snapshot_buffers* buffers) {
  std::vector<tensor_piece> out;
  for (const auto& s : segments_of(p, t, tp)) {
    const std::size_t lo = std::max(begin, s.local_begin), hi = std::min(end, s.local_begin + s.numel);
    if (lo >= hi) continue;
    tensor_piece q;
    q.name = name;
    q.global_shape = p.full_shape;
    q.offset = s.offset;
    q.shape = s.shape;
    if (lo != s.local_begin || hi != s.local_begin + s.numel)
      q.flat_range = std::pair<std::int64_t, std::int64_t>(lo - s.local_begin, hi - s.local_begin);
    if (local) q.data = buffers ? buffers->copy(local + lo, hi - lo) : std::vector<float>(local + lo, local + hi);
    out.push_back(std::move(q));
  }
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string t = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) t += (i ? ", " : "") + std::to_string(shape[i]);
  return t + "]";
}

// Why a saved tensor does not fit this model, and what to change. The vocabulary tensors differ
// when the layouts pad the vocabulary differently (to a multiple of
// --make-vocab-size-divisible-by x tensor-parallel size).
std::string shape_mismatch(const std::string& where, const model::parameter& p, const std::vector<std::int64_t>& saved,
                           const json& common, const config::megatron_args& a, int tp) {
  std::string m = where + " holds " + p.name + " as " + shape_text(saved) + " but this model has " + shape_text(p.full_shape);
  const bool vocabulary = p.name == "embedding.word_embeddings.weight" || p.name == "output_layer.weight";
  if (!vocabulary) return m + "; the checkpoint was saved by a different model: use the flags it was saved with";
  const auto& args = common.value("args", json::object());
  const std::int64_t saved_divisor = args.value("make_vocab_size_divisible_by", std::int64_t{0});
  const std::int64_t saved_tp = args.value("tensor_model_parallel_size", std::int64_t{0});
  m += ": the padded vocabulary differs (Megatron pads it to a multiple of --make-vocab-size-divisible-by x "
       "--tensor-model-parallel-size, here " + std::to_string(a.network_size.make_vocab_size_divisible_by) + " x " +
       std::to_string(tp) + ")";
  if (saved_divisor > 0 && saved_tp > 0 && (saved_divisor * saved_tp) % tp == 0)
    return m + "; pass --make-vocab-size-divisible-by " + std::to_string(saved_divisor * saved_tp / tp) +
           " to pad as the checkpoint does";
  return m + "; pass a --make-vocab-size-divisible-by that pads to " + std::to_string(saved[0]) + " rows";
}

// A whole 1-d fp32 buffer (a MoE router's expert bias) as one piece; data left empty for a load.
tensor_piece buffer_piece(const std::string& name, std::size_t n, const float* data) {
  tensor_piece q;
  q.name = name;
  q.global_shape = {static_cast<std::int64_t>(n)};
  q.offset = {0};
  q.shape = q.global_shape;
  if (data) q.data.assign(data, data + n);
  return q;
}

std::string optimizer_name(const std::string& state, const std::string& param) {
  return "optimizer.state." + state + "." + param;
}

}  // namespace mactor::training
