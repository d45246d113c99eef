// --moe-use-upcycling: a MoE model's first weights from a dense model's checkpoint, as Megatron-Core's
// upcycling_utils converts the dense state dict (granularity and scaling of arXiv 2410.07524).
// Every tensor the two models share is read as saved; expert e of a MoE layer is slice e % g of
// the layer's dense MLP (g = the dense FFN width / --moe-ffn-hidden-size: fc1's rows, both halves
// of a gated fc1, fc2's columns) times s = a^(1/3) for a gated or squared-ReLU MLP and a^(1/2)
// otherwise, where a = E g^2 / (g topk) with --moe-router-pre-softmax and a = g without; the
// router keeps its initial values with each row repeated g times (repeat_router_rows), so the g
// slices of one dense MLP share a logit.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/tensor_source.hpp"
#include "config/megatron_args.hpp"

namespace mactor::training {

struct upcycling_settings {
  int num_experts = 0;
  int topk = 0;
  int moe_ffn_hidden_size = 0;
  bool pre_softmax = false;
  bool gated = false;         // --swiglu
  bool squared_relu = false;  // --squared-relu
  bool grouped_gemm = false;  // the experts' names (linear_fc1.weight<e>)
  /// The dense model's FFN width Megatron builds to load the checkpoint into: --ffn-hidden-size
  /// times --moe-upcycling-granularity.
  std::int64_t dense_ffn_hidden_size = 0;
};
/// From the flags (validation has refused what Megatron's upcycling refuses).
upcycling_settings upcycling_settings_of(const config::megatron_args& a);

class moe_upcycling final : public checkpoint::tensor_source {
 public:
  explicit moe_upcycling(const checkpoint::checkpoint_reader& dense, upcycling_settings s);

  /// The dense checkpoint's names and every MoE layer's expert weights.
  std::vector<std::string> names() const override;
  bool has(const std::string& name) const override;
  std::vector<std::int64_t> global_shape(const std::string& name) const override;
  void read(checkpoint::tensor_piece& req) const override;

  /// g of the MoE layer whose MLP is `mlp` (e.g. "decoder.layers.1.mlp"); checkpoint_error when
  /// the dense FFN width is not a multiple of --moe-ffn-hidden-size or E not one of g.
  int granularity(const std::string& mlp) const;
  /// weight [experts, hidden] in place: row e takes row e / g (Megatron's _process_router_param).
  static void repeat_router_rows(float* weight, int experts, int hidden, int granularity);

 private:
  struct expert_weight {
    std::string mlp;  // "decoder.layers.<i>.mlp"
    int expert = 0;
    int linear = 1;   // 1: linear_fc1, 2: linear_fc2
  };
  std::optional<expert_weight> expert_of(const std::string& name) const;
  std::vector<float> expert_values(const expert_weight& w) const;
  double weight_scale(int g) const;

  const checkpoint::checkpoint_reader& dense_;
  upcycling_settings s_;
  mutable std::mutex mutex_;
  mutable std::string cached_name_;  // the last dense MLP weight read whole
  mutable std::vector<float> cached_;
};

class stage_engine;
/// Every MoE router weight of the engine's chunks (in their main parameters, before the model's
/// are rounded from them): row e takes row e / g of its initial values. checkpoint_error where
/// FSDP's sharded parameters leave a rank only part of a router (not built yet).
void repeat_router_rows(const moe_upcycling& upcycling, stage_engine& engine);

}  // namespace mactor::training
