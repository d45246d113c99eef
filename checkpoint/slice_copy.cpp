// Row-by-row assembly: the requested range is walked one last-dim row segment at a time; each
// source contributes the part of that segment inside its slice and its flat range.
#include "checkpoint/slice_copy.hpp"

#include <algorithm>
#include <cstring>

namespace mactor::checkpoint {
namespace {

std::int64_t product(const std::vector<std::int64_t>& v, std::size_t from, std::size_t to) {
  std::int64_t n = 1;
  for (std::size_t i = from; i < to; ++i) n *= v[i];
  return n;
}

std::pair<std::int64_t, std::int64_t> range_of(const slice_view& v) {
  return v.flat_range ? *v.flat_range : std::make_pair<std::int64_t, std::int64_t>(
                                            0, product(v.shape, 0, v.shape.size()));
}

// Per-dim [lo, hi) box in global coordinates, with dim 0 narrowed to the rows the range touches.
std::vector<std::pair<std::int64_t, std::int64_t>> bounding_box(const slice_view& v) {
  std::vector<std::pair<std::int64_t, std::int64_t>> box;
  for (std::size_t d = 0; d < v.shape.size(); ++d)
    box.emplace_back(v.offset[d], v.offset[d] + v.shape[d]);
  const auto [b, e] = range_of(v);
  if (box.empty() || e <= b) return box;
  const std::int64_t inner = product(v.shape, 1, v.shape.size());
  if (inner > 0) box[0] = {v.offset[0] + b / inner, v.offset[0] + (e - 1) / inner + 1};
  return box;
}

}  // namespace

bool may_overlap(const slice_view& a, const slice_view& b) {
  const auto ra = range_of(a), rb = range_of(b);
  if (ra.second <= ra.first || rb.second <= rb.first) return false;
  const auto ba = bounding_box(a), bb = bounding_box(b);
  for (std::size_t d = 0; d < ba.size() && d < bb.size(); ++d)
    if (std::max(ba[d].first, bb[d].first) >= std::min(ba[d].second, bb[d].second)) return false;
  return true;
}

std::optional<std::vector<std::int64_t>> copy_slices(const slice_view& dst_view, float* dst,
                                                     const std::vector<source_slice>& sources) {
  const std::size_t n = dst_view.shape.size();  // >= 1: callers give 0-d tensors shape [1]
  const std::int64_t row_len = dst_view.shape[n - 1];
  const auto [begin, end] = range_of(dst_view);
  if (end <= begin || row_len == 0) return std::nullopt;
  std::vector<std::int64_t> prefix(n);  // global index of the current row (last dim unused)
  std::vector<std::pair<std::int64_t, std::int64_t>> covered;
  for (std::int64_t row = begin / row_len; row <= (end - 1) / row_len; ++row) {
    const std::int64_t seg_begin = std::max(begin, row * row_len);
    const std::int64_t seg_end = std::min(end, (row + 1) * row_len);
    for (std::int64_t d = std::int64_t(n) - 2, rest = row; d >= 0; --d) {
      prefix[d] = dst_view.offset[d] + rest % dst_view.shape[d];
      rest /= dst_view.shape[d];
    }
    const std::int64_t c0 = dst_view.offset[n - 1] + (seg_begin - row * row_len);
    const std::int64_t c1 = c0 + (seg_end - seg_begin);
    covered.clear();
    for (const auto& s : sources) {
      const auto& po = s.view.offset;
      const auto& ps = s.view.shape;
      std::int64_t local_row = 0;
      bool inside = true;
      for (std::size_t d = 0; d + 1 < n && inside; ++d) {
        inside = prefix[d] >= po[d] && prefix[d] < po[d] + ps[d];
        local_row = local_row * ps[d] + (prefix[d] - po[d]);
      }
      if (!inside) continue;
      const std::int64_t x0 = std::max(c0, po[n - 1]), x1 = std::min(c1, po[n - 1] + ps[n - 1]);
      if (x0 >= x1) continue;
      const auto [pb, pe] = range_of(s.view);
      const std::int64_t f0 = local_row * ps[n - 1] + (x0 - po[n - 1]);
      const std::int64_t g0 = std::max(f0, pb), g1 = std::min(f0 + (x1 - x0), pe);
      if (g0 >= g1) continue;
      const std::int64_t xs = x0 + (g0 - f0);
      const std::int64_t at = row * row_len + (xs - dst_view.offset[n - 1]) - begin;
      std::memcpy(dst + at, s.data + (g0 - pb), std::size_t(g1 - g0) * sizeof(float));
      covered.emplace_back(xs, xs + (g1 - g0));
    }
    std::sort(covered.begin(), covered.end());
    std::int64_t next = c0;
    for (const auto& [a, b] : covered) {
      if (a > next) break;
      next = std::max(next, b);
    }
    if (next < c1) {
      prefix[n - 1] = next;
      return prefix;
    }
  }
  return std::nullopt;
}

}  // namespace mactor::checkpoint
