// Parameter registration, seeded initialization and tensor-parallel shard copies.
#include "model/parameter.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>

#include "kernels/convert.hpp"
#include "kernels/tensor_ops.hpp"
#include "tensor/default_device.hpp"
#include "tensor/memory_ledger.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {
namespace {

std::int64_t rows_of(const std::vector<std::int64_t>& s) { return s[0]; }
// The elements of one row (dim 0) of an n-d tensor.
std::int64_t cols_of(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (std::size_t d = 1; d < s.size(); ++d) n *= s[d];
  return n;
}

// Visits (full offset, local offset, length) runs of the shard.
void for_each_run(const std::vector<std::int64_t>& full, tp_split split, int rank, int size,
                  const std::vector<std::int64_t>& segments,
                  const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& run) {
  const std::int64_t rows = rows_of(full), cols = cols_of(full);
  switch (split) {
    case tp_split::replicated:
      run(0, 0, rows * cols);
      return;
    case tp_split::rows: {
      const std::int64_t local = rows / size;
      run(rank * local * cols, 0, local * cols);
      return;
    }
    case tp_split::columns: {
      const std::int64_t local = cols / size;
      for (std::int64_t r = 0; r < rows; ++r) run(r * cols + rank * local, r * local, local);
      return;
    }
    case tp_split::row_halves: {
      const std::int64_t half = rows / 2, local = half / size;
      run(rank * local * cols, 0, local * cols);
      run((half + rank * local) * cols, local * cols, local * cols);
      return;
    }
    case tp_split::row_segments: {
      std::int64_t first = 0, at = 0;  // the segment's first full row; the next local element
      for (const auto rows : segments) {
        const std::int64_t local = rows / size;
        run((first + rank * local) * cols, at, local * cols);
        first += rows, at += local * cols;
      }
      return;
    }
  }
}

std::uint64_t name_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::vector<std::int64_t> shard_shape(const std::vector<std::int64_t>& full, tp_split split,
                                      int tp_size) {
  auto s = full;
  if (split == tp_split::rows || split == tp_split::row_halves || split == tp_split::row_segments) s[0] /= tp_size;
  if (split == tp_split::columns) s[1] /= tp_size;
  return s;
}

template <typename T>
void copy_shard(const T* full, T* local, const std::vector<std::int64_t>& full_shape,
                tp_split split, int tp_rank, int tp_size, const std::vector<std::int64_t>& segments) {
  for_each_run(full_shape, split, tp_rank, tp_size, segments,
               [&](std::int64_t f, std::int64_t l, std::int64_t n) {
                 std::copy_n(full + f, n, local + l);
               });
}

template <typename T>
void place_shard(const T* local, T* full, const std::vector<std::int64_t>& full_shape,
                 tp_split split, int tp_rank, int tp_size, const std::vector<std::int64_t>& segments) {
  for_each_run(full_shape, split, tp_rank, tp_size, segments,
               [&](std::int64_t f, std::int64_t l, std::int64_t n) {
                 std::copy_n(local + l, n, full + f);
               });
}

int parameter_store::add(std::string name, std::vector<std::int64_t> full_shape,
                            tp_split split, init_kind init, double std) {
  parameter p;
  p.no_weight_decay = full_shape.size() == 1 || name.ends_with(".bias");
  p.name = std::move(name);
  p.full_shape = std::move(full_shape);
  p.split = split;
  params_.push_back(std::move(p));
  inits_.push_back({init, std});
  return int(params_.size()) - 1;
}

void parameter_store::draw(std::vector<float>& full, std::uint64_t seed,
                           const std::vector<std::int64_t>& full_shape, init_spec init) const {
  std::mt19937_64 rng(seed);
  // fp32 values, the same in every dtype.
  if (init.kind == init_kind::normal && xavier_uniform_) {
    const double bound = std::sqrt(6.0 / double(rows_of(full_shape) + cols_of(full_shape)));
    std::uniform_real_distribution<double> uniform(-bound, bound);
    for (auto& v : full) v = float(uniform(rng));
    return;
  }
  std::normal_distribution<double> normal(0.0, init.std);
  for (auto& v : full) v = float(normal(rng));
}

void parameter_store::lay_out(int tp_size) {
  // Every other parameter first, then the experts (Megatron keeps them in a buffer of their
  // own), each part in registration order.
  std::size_t total = 0;
  for (const bool experts : {false, true}) {
    if (experts) expert_begin_ = total;
    for (auto& p : params_) {
      if (p.expert != experts) continue;
      p.shape = shard_shape(p.full_shape, p.split, p.expert && expert_size_ > 0 ? expert_size_ : tp_size);
      p.numel = 1;
      for (auto d : p.shape) p.numel *= std::size_t(d);
      p.offset = total;
      total += p.numel;
    }
  }
  flat_numel_ = total;
  held_.clear();
}

void parameter_store::allocate(std::uint64_t seed, int tp_rank, int tp_size) {
  lay_out(tp_size);
  const tensor::shape_type flat{static_cast<std::int64_t>(flat_numel_)};
  values_ = tensor::tensor(flat, type_, tensor::memory_kind::parameters, tensor::default_device());
  grads_ = tensor::tensor(flat, grad_type_, tensor::memory_kind::gradients, tensor::default_device());
  held_ = {{0, flat_numel_, 0}};
  for (auto& p : params_) p.value = piece(values_, p), p.grad = piece(grads_, p);
  initialize(seed, tp_rank, tp_size);
}

void parameter_store::materialize_shard(std::uint64_t seed, int tp_rank, int tp_size, std::vector<held_range> ranges,
                                        std::size_t length) {
  if (!held_.empty()) throw std::logic_error("parameter_store::materialize_shard: the store is already allocated");
  check_ranges(ranges, length, "materialize_shard");
  values_ = tensor::tensor({static_cast<std::int64_t>(length)}, type_, tensor::memory_kind::parameters,
                           tensor::default_device());
  held_ = std::move(ranges);
  initialize(seed, tp_rank, tp_size);
}

void parameter_store::check_ranges(const std::vector<held_range>& ranges, std::size_t length, const char* what) const {
  for (const auto& r : ranges)
    if (r.begin > r.end || r.end > flat_numel_ || r.at + (r.end - r.begin) > length)
      throw std::logic_error(std::string("parameter_store::") + what + ": a range outside the layout or the shard");
}

void parameter_store::initialize(std::uint64_t seed, int tp_rank, int tp_size) {
  // One full tensor is drawn at a time into buffers that keep their capacity: the ledger counts
  // what they hold (the largest full tensor and local shard so far), freed at the end.
  std::vector<float> full, local;
  const auto fit = [](std::vector<float>& v, std::size_t n) {  // exactly n when it grows, not geometrically
    if (v.capacity() < n) v = std::vector<float>(n);
    v.resize(n);
  };
  tensor::counted_bytes drawn(tensor::memory_kind::other);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    // A parameter none of whose elements this store holds is not drawn at all.
    if (inits_[i].kind == init_kind::zeros || held(p.offset, p.offset + p.numel).empty()) continue;
    if (skip_weight_init_ && inits_[i].kind != init_kind::ones) continue;  // --no-initialization: zero as allocated
    fit(local, p.numel);
    if (inits_[i].kind == init_kind::ones) {
      std::fill(local.begin(), local.end(), 1.0f);
    } else {
      fit(full, std::size_t(rows_of(p.full_shape) * cols_of(p.full_shape)));
      drawn.set(std::int64_t((full.capacity() + local.capacity()) * sizeof(float)));
      draw(full, name_seed(seed, p.name), p.full_shape, inits_[i]);
      const bool own_split = p.expert && expert_size_ > 0;
      copy_shard(full.data(), local.data(), p.full_shape, p.split, own_split ? expert_rank_ : tp_rank,
                 own_split ? expert_size_ : tp_size, p.segments);
    }
    set_initial_values(int(i), tensor::view_of(std::span<const float>(local)));
  }
}

void parameter_store::set_initial_values(int id, tensor::const_tensor_view local) {
  const auto& p = params_.at(std::size_t(id));
  if (std::size_t(local.numel()) != p.numel)
    throw std::logic_error("parameter_store::set_initial_values: " + p.name + " has " + std::to_string(p.numel) +
                           " elements here");
  tensor::const_tensor_view flat(local.data, {local.numel()}, local.type, local.where);
  // Values drawn on the host travel to a device store as they are, then convert there.
  tensor::tensor uploaded;
  if (values_.where() != flat.where) {
    uploaded = tensor::copy_to(flat, values_.where(), tensor::memory_kind::other);
    flat = uploaded;
  }
  for (const auto& h : held(p.offset, p.offset + p.numel)) {
    const auto from = std::int64_t(h.begin - p.offset), n = std::int64_t(h.end - h.begin);
    kernels::convert(values_.view().rows(std::int64_t(h.at), std::int64_t(h.at) + n), flat.rows(from, from + n));
  }
}

void parameter_store::zero_grad() {
  if (grads_.defined()) grads_.zero();
}

tensor::tensor_view parameter_store::piece(tensor::tensor_view buffer, const parameter& p) {
  auto v = buffer.rows(std::int64_t(p.offset), std::int64_t(p.offset + p.numel));
  v.shape = p.shape;
  return v;
}

void parameter_store::keep_values_shard(std::vector<held_range> ranges, std::size_t length) {
  tensor::tensor shard({static_cast<std::int64_t>(length)}, type_, tensor::memory_kind::parameters, values_.where());
  shard.zero();
  check_ranges(ranges, length, "keep_values_shard");
  for (const auto& r : ranges) {
    // From wherever the store holds those elements now (the whole layout, unless sharded before).
    for (const auto& h : held(r.begin, r.end)) {
      const auto to = static_cast<std::int64_t>(r.at + (h.begin - r.begin)), n = static_cast<std::int64_t>(h.end - h.begin);
      kernels::copy(shard.view().rows(to, to + n), values_.view().rows(std::int64_t(h.at), std::int64_t(h.at) + n));
    }
  }
  values_ = std::move(shard);
  held_ = std::move(ranges);
  unbind_values();
}

void parameter_store::drop_values(const std::vector<int>& ids) {
  if (held_ != std::vector<held_range>{{0, flat_numel_, 0}})
    throw std::logic_error("parameter_store::drop_values: the store does not hold its whole layout");
  std::vector<bool> dropped(params_.size(), false);
  for (int id : ids) dropped.at(static_cast<std::size_t>(id)) = true;
  // The kept parameters' flat ranges, merged where they touch, packed one after another.
  std::vector<held_range> ranges;
  std::size_t length = 0;
  std::vector<const parameter*> kept;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!dropped[i]) kept.push_back(&params_[i]);
  std::sort(kept.begin(), kept.end(), [](const parameter* a, const parameter* b) { return a->offset < b->offset; });
  for (const auto* p : kept) {
    if (!ranges.empty() && ranges.back().end == p->offset)
      ranges.back().end += p->numel;
    else
      ranges.push_back({p->offset, p->offset + p->numel, length});
    length += p->numel;
  }
  keep_values_shard(std::move(ranges), length);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    if (dropped[i] || p.numel == 0) continue;
    const auto at = static_cast<std::int64_t>(held(p.offset, p.offset + 1).front().at);
    p.value = values_.view().rows(at, at + static_cast<std::int64_t>(p.numel));
    p.value.shape = p.shape;
  }
}

std::vector<held_range> parameter_store::held(std::size_t begin, std::size_t end) const {
  std::vector<held_range> out;
  for (const auto& r : held_) {
    const std::size_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
    if (lo < hi) out.push_back({lo, hi, r.at + (lo - r.begin)});
  }
  return out;
}

void parameter_store::bind_values(tensor::tensor_view full) {
  if (full.type != type_ || std::size_t(full.numel()) < flat_numel_)
    throw std::logic_error("parameter_store::bind_values: not a whole flat layout of the store's dtype");
  for (auto& p : params_) p.value = piece(full, p);
}

namespace {

// Points `slot` (parameter p's value or gradient) at `v`: p's numel elements of `type`, in p's shape.
void bind_one(const parameter& p, tensor::tensor_view& slot, tensor::tensor_view v, tensor::dtype type,
              const char* what) {
  if (v.type != type || std::size_t(v.numel()) != p.numel)
    throw std::logic_error(std::string("parameter_store::") + what + ": " + p.name + " needs " +
                           std::to_string(p.numel) + " elements of " + std::string(tensor::short_name(type)));
  slot = v;
  slot.shape = p.shape;
}

}  // namespace

void parameter_store::bind_value(int id, tensor::tensor_view v) {
  auto& p = params_.at(std::size_t(id));
  bind_one(p, p.value, v, type_, "bind_value");
}

void parameter_store::bind_grad(int id, tensor::tensor_view g) {
  auto& p = params_.at(std::size_t(id));
  bind_one(p, p.grad, g, grad_type_, "bind_grad");
}

void parameter_store::unbind_values() {
  for (auto& p : params_) p.value.data = nullptr;
}

void parameter_store::drop_grads() {
  grads_ = tensor::tensor();
  unbind_grads();
}

void parameter_store::bind_grads(tensor::tensor_view full) {
  if (full.type != grad_type_ || std::size_t(full.numel()) < flat_numel_)
    throw std::logic_error("parameter_store::bind_grads: not a whole flat layout of the gradients' dtype");
  for (auto& p : params_) p.grad = piece(full, p);
}

void parameter_store::unbind_grads() {
  for (auto& p : params_) p.grad.data = nullptr;
}
using segment_rows = std::vector<std::int64_t>;
template void copy_shard<float>(const float*, float*, const std::vector<std::int64_t>&, tp_split,
                                int, int, const segment_rows&);
template void copy_shard<double>(const double*, double*, const std::vector<std::int64_t>&,
                                 tp_split, int, int, const segment_rows&);
template void place_shard<float>(const float*, float*, const std::vector<std::int64_t>&, tp_split,
                                 int, int, const segment_rows&);
template void place_shard<double>(const double*, double*, const std::vector<std::int64_t>&,
                                  tp_split, int, int, const segment_rows&);

}  // namespace mactor::model
