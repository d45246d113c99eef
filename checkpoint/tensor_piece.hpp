// What a rank hands to save() and asks of checkpoint_reader: named pieces of global fp32 tensors,
// each an nd slice of the global tensor, optionally only a flat range of that slice (Megatron's
// ShardedTensor with flattened_range, as the distributed optimizer saves its shards).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mactor::checkpoint {

/// One piece of a global tensor held by this rank. A 0-d tensor has empty shapes and one element.
struct tensor_piece {
  std::string name;  // global name, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::vector<std::int64_t> global_shape;
  std::vector<std::int64_t> offset;  // nd offset of this piece's slice in the global tensor
  std::vector<std::int64_t> shape;   // nd extent of the slice
  /// [begin, end) within the row-major slice; data then holds only that range.
  std::optional<std::pair<std::int64_t, std::int64_t>> flat_range;
  std::vector<float> data;  // owned snapshot (saving) or destination (loading)
};

/// What one rank saves: its pieces, and on rank 0 the common document (iteration, consumed
/// samples, scheduler, rng, the config under "args"); other ranks' common is ignored.
struct rank_state {
  std::vector<tensor_piece> pieces;
  std::optional<nlohmann::json> common;
  /// --ckpt-format torch: the rank's whole files instead of pieces (paths relative to the
  /// iteration directory, e.g. "mp_rank_00/model_optim_rng.pt" and, with the distributed
  /// optimizer, "mp_rank_00/distrib_optim.pt", and their bytes); most ranks write none.
  /// The iteration then has no metadata.json or common.json (Megatron's torch layout).
  std::optional<std::vector<std::pair<std::string, std::string>>> files;
};

/// A piece covering the whole global tensor (offset 0, shape = global_shape).
tensor_piece whole_tensor(std::string name, std::vector<std::int64_t> global_shape,
                          std::vector<float> data = {});

/// Product of the extents (1 for an empty shape).
std::int64_t numel(const std::vector<std::int64_t>& shape);
/// Elements the piece's data holds: its flat range's length, else numel(shape).
std::int64_t piece_elements(const tensor_piece& p);
/// Throws checkpoint_error naming the piece when its shapes, offset, range or data size disagree.
/// check_data: also require data.size() == piece_elements(p).
void validate_piece(const tensor_piece& p, bool check_data);

}  // namespace mactor::checkpoint
