// The resharding core: copy the overlap of saved pieces into a requested piece, where both are nd
// slices of one global tensor, each optionally narrowed to a flat range of its row-major slice.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace mactor::checkpoint {

/// A slice of a global tensor: nd offset and extent, and the flat range of it that data holds.
struct slice_view {
  const std::vector<std::int64_t>& offset;
  const std::vector<std::int64_t>& shape;
  std::optional<std::pair<std::int64_t, std::int64_t>> flat_range;
};

/// False when the two slices certainly share no element (a cheap bounding-box test).
bool may_overlap(const slice_view& a, const slice_view& b);

struct source_slice {
  slice_view view;
  const float* data;  // the view's flat range (or whole slice), row-major
};

/// Fills dst (laid out as dst_view's flat range) from the sources. Returns the global nd index of
/// the first element no source holds, or nullopt when every element was filled.
std::optional<std::vector<std::int64_t>> copy_slices(const slice_view& dst_view, float* dst,
                                                     const std::vector<source_slice>& sources);

}  // namespace mactor::checkpoint
