// Shape arithmetic and the consistency rules of tensor_piece.
#include "checkpoint/tensor_piece.hpp"

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::checkpoint {
namespace {

std::string dims(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

tensor_piece whole_tensor(std::string name, std::vector<std::int64_t> global_shape,
                          std::vector<float> data) {
  tensor_piece p;
  p.name = std::move(name);
  p.offset.assign(global_shape.size(), 0);
  p.shape = global_shape;
  p.global_shape = std::move(global_shape);
  p.data = std::move(data);
  return p;
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t piece_elements(const tensor_piece& p) {
  return p.flat_range ? p.flat_range->second - p.flat_range->first : numel(p.shape);
}

void validate_piece(const tensor_piece& p, bool check_data) {
  const std::string what = "tensor piece \"" + p.name + "\" (global shape " + dims(p.global_shape) +
                           ", offset " + dims(p.offset) + ", shape " + dims(p.shape) + ")";
  if (p.name.empty()) throw checkpoint_error("a tensor piece has an empty name; name every tensor");
  if (p.offset.size() != p.global_shape.size() || p.shape.size() != p.global_shape.size())
    throw checkpoint_error(what + ": offset, shape and global shape need the same number of dims");
  for (std::size_t d = 0; d < p.shape.size(); ++d)
    if (p.global_shape[d] < 0 || p.offset[d] < 0 || p.shape[d] < 0 ||
        p.offset[d] + p.shape[d] > p.global_shape[d])
      throw checkpoint_error(what + ": dim " + std::to_string(d) +
                             " of the slice lies outside the global tensor");
  if (p.flat_range) {
    const auto [b, e] = *p.flat_range;
    if (b < 0 || e < b || e > numel(p.shape))
      throw checkpoint_error(what + ": flat range [" + std::to_string(b) + ", " + std::to_string(e) +
                             ") is not within the slice's " + std::to_string(numel(p.shape)) +
                             " elements");
  }
  if (check_data && std::int64_t(p.data.size()) != piece_elements(p))
    throw checkpoint_error(what + ": data holds " + std::to_string(p.data.size()) +
                           " floats but the slice" + (p.flat_range ? "'s flat range" : "") +
                           " has " + std::to_string(piece_elements(p)));
}

}  // namespace mactor::checkpoint
