// The dense-to-MoE tensor view of --moe-use-upcycling.
#include "training/moe_upcycling.hpp"

#include <cmath>
#include <regex>
#include <stdexcept>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/slice_copy.hpp"
#include "training/host_floats.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {
namespace {

using checkpoint::checkpoint_error;

std::string fc_name(const std::string& mlp, int linear) { return mlp + ".linear_fc" + std::to_string(linear) + ".weight"; }

}  // namespace

upcycling_settings upcycling_settings_of(const config::megatron_args& a) {
  upcycling_settings s;
  s.num_experts = int(a.moe.num_experts.value_or(0));
  s.topk = int(a.moe.moe_router_topk);
  s.moe_ffn_hidden_size = int(a.moe.moe_ffn_hidden_size.value_or(a.network_size.ffn_hidden_size.value_or(0)));
  s.pre_softmax = a.moe.moe_router_pre_softmax;
  s.gated = a.network_size.swiglu;
  s.squared_relu = a.network_size.squared_relu;
  s.grouped_gemm = a.moe.moe_grouped_gemm && !a.moe.moe_use_legacy_grouped_gemm;  // legacy: SequentialMLP's names
  s.dense_ffn_hidden_size = a.network_size.ffn_hidden_size.value_or(0) * a.moe.moe_upcycling_granularity;
  return s;
}

moe_upcycling::moe_upcycling(const checkpoint::checkpoint_reader& dense, upcycling_settings s) : dense_(dense), s_(s) {}

std::optional<moe_upcycling::expert_weight> moe_upcycling::expert_of(const std::string& name) const {
  static const std::regex sequential(R"(^(.*\.mlp)\.experts\.local_experts\.(\d+)\.linear_fc([12])\.weight$)");
  static const std::regex grouped(R"(^(.*\.mlp)\.experts\.linear_fc([12])\.weight(\d+)$)");
  std::smatch m;
  if (std::regex_match(name, m, sequential)) return expert_weight{m[1], std::stoi(m[2]), std::stoi(m[3])};
  if (std::regex_match(name, m, grouped)) return expert_weight{m[1], std::stoi(m[3]), std::stoi(m[2])};
  return std::nullopt;
}

int moe_upcycling::granularity(const std::string& mlp) const {
  const auto fc2 = dense_.global_shape(fc_name(mlp, 2));  // [hidden, dense ffn]
  const auto ffn = fc2.size() == 2 ? fc2[1] : 0;
  if (ffn != s_.dense_ffn_hidden_size)
    throw checkpoint_error("--moe-use-upcycling: the dense checkpoint's " + fc_name(mlp, 2) + " is " + std::to_string(ffn) +
                           " wide, but Megatron builds the dense model with --ffn-hidden-size x --moe-upcycling-granularity = " +
                           std::to_string(s_.dense_ffn_hidden_size) + "; set --moe-upcycling-granularity to match");
  if (s_.moe_ffn_hidden_size <= 0 || ffn % s_.moe_ffn_hidden_size != 0)
    throw checkpoint_error("--moe-use-upcycling: the dense checkpoint's " + fc_name(mlp, 2) + " is " + std::to_string(ffn) +
                           " wide, not a multiple of --moe-ffn-hidden-size " + std::to_string(s_.moe_ffn_hidden_size) +
                           " (The ffn hidden size of dense model must be divisible by ffn hidden size of moe model)");
  const int g = int(ffn / s_.moe_ffn_hidden_size);
  if (s_.num_experts % g != 0)
    throw checkpoint_error("--moe-use-upcycling: --num-experts " + std::to_string(s_.num_experts) +
                           " must be a multiple of the granularity " + std::to_string(g) +
                           " (The number of experts must be divisible by granularity for upcycling)");
  return g;
}

double moe_upcycling::weight_scale(int g) const {
  const double activation = s_.pre_softmax ? double(s_.num_experts) * g / s_.topk : double(g);
  return std::pow(activation, s_.gated || s_.squared_relu ? 1.0 / 3.0 : 1.0 / 2.0);
}

std::vector<std::string> moe_upcycling::names() const {
  std::vector<std::string> out = dense_.names();
  static const std::regex fc1(R"(^(.*\.mlp)\.linear_fc1\.weight$)");
  std::smatch m;
  for (const auto& n : dense_.names())
    if (std::regex_match(n, m, fc1))
      for (int e = 0; e < s_.num_experts; ++e)
        for (int linear : {1, 2})
          out.push_back(s_.grouped_gemm ? m[1].str() + ".experts.linear_fc" + std::to_string(linear) + ".weight" + std::to_string(e)
                                        : m[1].str() + ".experts.local_experts." + std::to_string(e) + ".linear_fc" +
                                              std::to_string(linear) + ".weight");
  return out;
}

bool moe_upcycling::has(const std::string& name) const {
  if (const auto w = expert_of(name)) return w->expert < s_.num_experts && dense_.has(fc_name(w->mlp, w->linear));
  return dense_.has(name);
}

std::vector<std::int64_t> moe_upcycling::global_shape(const std::string& name) const {
  const auto w = expert_of(name);
  if (!w) return dense_.global_shape(name);
  auto shape = dense_.global_shape(fc_name(w->mlp, w->linear));
  const int g = granularity(w->mlp);
  shape[w->linear == 1 ? 0 : 1] /= g;  // fc1's rows, fc2's columns
  return shape;
}

std::vector<float> moe_upcycling::expert_values(const expert_weight& w) const {
  const std::string dense_name = fc_name(w.mlp, w.linear);
  const auto shape = dense_.global_shape(dense_name);
  const int g = granularity(w.mlp), slice = w.expert % g;
  const double scale = weight_scale(g);
  std::lock_guard lock(mutex_);
  if (cached_name_ != dense_name) cached_ = dense_.read_whole(dense_name), cached_name_ = dense_name;
  const std::int64_t rows = shape[0], cols = shape[1];
  std::vector<float> out;
  const auto take_rows = [&](std::int64_t first, std::int64_t count) {
    for (std::int64_t r = first; r < first + count; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out.push_back(float(cached_[std::size_t(r * cols + c)] * scale));
  };
  if (w.linear == 1) {
    // A gated fc1 is [gate; up]: each half is split into g row blocks, expert slice r = [gate_r; up_r].
    const std::int64_t halves = s_.gated ? 2 : 1, part = rows / halves / g;
    for (std::int64_t h = 0; h < halves; ++h) take_rows(h * (rows / halves) + slice * part, part);
  } else {
    const std::int64_t part = cols / g;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = slice * part; c < (slice + 1) * part; ++c)
        out.push_back(float(cached_[std::size_t(r * cols + c)] * scale));
  }
  return out;
}

void moe_upcycling::read(checkpoint::tensor_piece& req) const {
  const auto w = expert_of(req.name);
  if (!w) {
    dense_.read(req);
    return;
  }
  const auto shape = global_shape(req.name);
  if (shape != req.global_shape)
    throw checkpoint_error("--moe-use-upcycling: expert weight " + req.name + " from the dense checkpoint has another shape "
                           "than the model's; check --moe-ffn-hidden-size and --hidden-size");
  const auto whole = expert_values(*w);
  const std::vector<std::int64_t> origin(shape.size(), 0);
  req.data.assign(std::size_t(checkpoint::piece_elements(req)), 0.0f);
  checkpoint::copy_slices({req.offset, req.shape, req.flat_range}, req.data.data(),
                          {{{origin, shape, std::nullopt}, whole.data()}});
}

void moe_upcycling::repeat_router_rows(float* weight, int experts, int hidden, int granularity) {
  if (granularity <= 1) return;
  // Row e becomes row e / g, walking down so no source row is overwritten before it is read.
  for (int e = experts - 1; e >= 0; --e)
    if (e / granularity != e)
      std::copy_n(weight + std::size_t(e / granularity) * hidden, hidden, weight + std::size_t(e) * hidden);
}

void repeat_router_rows(const moe_upcycling& upcycling, stage_engine& engine) {
  const std::string suffix = ".router.weight";
  for (std::size_t c = 0; c < engine.chunks().size(); ++c)
    for (auto& p : engine.chunks()[c].parameters()) {
      if (!p.name.ends_with(".mlp" + suffix) || p.full_shape.size() != 2) continue;
      const int g = upcycling.granularity(p.name.substr(0, p.name.size() - suffix.size()));
      if (g <= 1) continue;
      const auto held = engine.main_params().held(c, p.offset, p.offset + p.numel);
      if (held.size() != 1 || held[0].begin != p.offset || held[0].end != p.offset + p.numel)
        throw checkpoint_error("--moe-use-upcycling with --moe-upcycling-granularity > 1 under FSDP's sharded parameters "
                               "is not built yet (each rank holds part of the router); upcycle without FSDP first");
      // Rows repeat on the host; the router's main parameters may be on the model's device.
      auto rows = tensor::host_copy<float>({held[0].values, {std::int64_t(p.numel)}, tensor::dtype::float32, engine.device()});
      moe_upcycling::repeat_router_rows(rows.data(), int(p.full_shape[0]), int(p.full_shape[1]), g);
      write_floats(engine.device(), held[0].values, rows);
    }
}

}  // namespace mactor::training
