// fp8 primary weights: the cast of the main parameters to fp8 after each step, and its inverse.
#include "training/fp8_params.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include "kernels/convert.hpp"
#include "kernels/fp8.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/fp8_linear.hpp"

namespace mactor::training {
namespace {

constexpr auto e4m3 = kernels::fp8_type::e4m3;  // weights are e4m3 under both fp8 formats
// The cast rounds the main parameters to the model's dtype this many elements at a time (its
// scratch stays small beside the weights).
constexpr std::size_t cast_block = std::size_t{1} << 16;

// TE's reduce-max of the amaxes over the shard group (its all_reduce with ReduceOp.MAX).
void max_over(std::vector<float>& amaxes, comm::communicator* group) {
  if (!group || group->size() == 1 || amaxes.empty()) return;
  std::vector<float> all(amaxes.size() * static_cast<std::size_t>(group->size()));
  group->all_gather(std::span<const float>(amaxes), std::span<float>(all));
  for (std::size_t m = 0; m < static_cast<std::size_t>(group->size()); ++m)
    for (std::size_t i = 0; i < amaxes.size(); ++i) amaxes[i] = std::fmax(amaxes[i], all[m * amaxes.size() + i]);
}

}  // namespace

fp8_params::fp8_params(std::vector<model::gpt_chunk>& chunks, main_params& main) : chunks_(chunks), main_(main) {
  std::vector<std::vector<int>> ids;
  for (auto& chunk : chunks_) {
    auto& ws = weights_.emplace_back();
    auto& fp8_ids = ids.emplace_back();
    std::size_t bytes = 0;
    // In flat order (the packed all-gather walks them so), each at the next bytes.
    std::vector<int> order(chunk.parameters().size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return chunk.parameters()[a].offset < chunk.parameters()[b].offset; });
    for (int id : order)
      if (const auto& p = chunk.parameters()[id]; p.fp8_gemm) {
        ws.push_back({p.offset, p.numel, bytes, p.fp8_gemm, 1.0f});
        fp8_ids.push_back(id);
        bytes += p.numel;
      }
    bytes_.emplace_back(tensor::shape_type{static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))},
                        tensor::dtype::float8_e4m3, tensor::memory_kind::parameters);
  }
  // weights_ is complete: the addresses of the scale_invs are stable from here on.
  for (std::size_t c = 0; c < weights_.size(); ++c)
    for (auto& w : weights_[c]) w.linear->use_primary_weight(bytes(c) + w.byte_offset, &w.scale_inv);
  cast_all();
  // The fp8 bytes are the weights now: their model-dtype slots go (half the memory under bf16).
  for (std::size_t c = 0; c < chunks_.size(); ++c) chunks_[c].store().drop_values(ids[c]);
}

std::uint8_t* fp8_params::bytes(std::size_t chunk) {
  return static_cast<std::uint8_t*>(bytes_[chunk].view().data);
}

std::size_t fp8_params::nbytes() const {
  std::size_t n = 0;
  for (const auto& ws : weights_)
    for (const auto& w : ws) n += w.numel;
  return n;
}

fp8_params::range fp8_params::piece(const weight& w, const std::vector<range>& ranges) {
  for (const auto& r : ranges) {
    const std::size_t lo = std::max(w.offset, r.begin), hi = std::min(w.offset + w.numel, r.end);
    if (lo < hi) return {lo, hi};
  }
  return {w.offset, w.offset};
}

// Elements [p.begin, p.end) of chunk c's main parameters in the model's dtype (TE casts the
// master weight to the model weight's dtype before quantizing it).
tensor::const_tensor_view fp8_params::model_dtype_piece(std::size_t c, const range& p) {
  const auto n = static_cast<std::int64_t>(p.end - p.begin);
  const auto main = tensor::view_of(std::span<const float>(main_.value_at(c, p.begin), static_cast<std::size_t>(n)));
  const auto type = chunks_[c].dtype();
  if (type == tensor::dtype::float32) return main;
  if (!scratch_.defined() || scratch_.numel() < n || scratch_.type() != type)
    scratch_ = tensor::tensor({n}, type, tensor::memory_kind::other);
  auto out = scratch_.view().rows(0, n);
  kernels::convert(out, main);
  return out;
}

std::vector<float> fp8_params::local_amaxes(const std::vector<std::vector<range>>& ranges) {
  std::vector<float> amaxes;
  for (std::size_t c = 0; c < weights_.size(); ++c)
    for (const auto& w : weights_[c]) {
      const auto p = piece(w, ranges[c]);
      float amax = 0.0f;
      for (std::size_t lo = p.begin; lo < p.end; lo += cast_block) {
        const float a = kernels::amax(model_dtype_piece(c, {lo, std::min(p.end, lo + cast_block)}));
        amax = std::isnan(a) || std::isnan(amax) ? NAN : std::max(amax, a);  // a NaN propagates, as the kernel's
      }
      amaxes.push_back(amax);
    }
  return amaxes;
}

void fp8_params::quantize_piece(std::size_t c, const weight& w, const range& p, float scale) {
  for (std::size_t lo = p.begin; lo < p.end; lo += cast_block) {
    const range block{lo, std::min(p.end, lo + cast_block)};
    kernels::quantize_fp8(bytes(c) + w.byte_offset + (lo - w.offset), model_dtype_piece(c, block), scale, e4m3);
  }
}

void fp8_params::cast(const std::vector<std::vector<range>>& ranges, comm::communicator* group) {
  auto amaxes = local_amaxes(ranges);
  max_over(amaxes, group);
  std::size_t i = 0;
  for (std::size_t c = 0; c < weights_.size(); ++c)
    for (auto& w : weights_[c]) {
      const float amax = amaxes[i++];
      if (w.linear->settings().recipe == model::fp8_recipe::delayed) {
        // TE's delayed path: quantize with the scale the history gave, record the amax.
        auto& state = w.linear->weight_scaling_state();
        quantize_piece(c, w, piece(w, ranges[c]), state.scale());
        state.record(amax);
        w.scale_inv = 1.0f / state.scale();
      } else {
        // Current scaling: one scale from the whole weight's amax.
        const auto [scale, scale_inv] = kernels::current_scale(amax, kernels::fp8_max(e4m3), false);
        quantize_piece(c, w, piece(w, ranges[c]), scale);
        w.scale_inv = scale_inv;
      }
    }
}

void fp8_params::cast_all() {
  std::vector<std::vector<range>> all;
  for (auto& chunk : chunks_) all.push_back({{0, chunk.store().flat_numel()}});
  cast(all, nullptr);
}

void fp8_params::dequantize_into(std::size_t c, std::span<float> flat) {
  for (const auto& w : weights_[c])
    kernels::dequantize_fp8(tensor::view_of(flat.subspan(w.offset, w.numel)), bytes(c) + w.byte_offset, w.scale_inv,
                            e4m3);
}

void fp8_params::dequantize_into_main() {
  for (std::size_t c = 0; c < weights_.size(); ++c)
    for (const auto& w : weights_[c])
      kernels::dequantize_fp8(tensor::view_of(std::span<float>(main_.value_at(c, w.offset), w.numel)),
                              bytes(c) + w.byte_offset, w.scale_inv, e4m3);
}

}  // namespace mactor::training
