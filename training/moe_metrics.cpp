// The MoE auxiliary-loss metrics of the log line.
#include "training/moe_metrics.hpp"

#include <algorithm>
#include <variant>

#include "config/moe_layout.hpp"
#include "model/moe_router.hpp"

namespace mactor::training {

std::vector<moe_metric> moe_metrics(const config::megatron_args& a, const std::vector<double>& losses) {
  std::vector<moe_metric> out;
  if (!a.moe.num_experts) return out;
  // Megatron's tracker has an entry for each MTP depth too, and counts each depth as a MoE layer.
  const int decoder_layers = int(a.network_size.num_layers.value_or(0));
  const int depths = int(a.network_size.mtp_num_layers.value_or(0));
  const int layers = decoder_layers + depths;
  if (layers <= 0 || losses.size() != model::moe_aux_loss_kinds * std::size_t(layers)) return out;
  const auto pattern = config::moe_layer_pattern(a);
  int moe_layers = depths;
  for (auto v : pattern) moe_layers += int(v);
  auto add = [&](const char* name, int k) {
    moe_metric m;
    m.name = name;
    float sum = 0;  // Megatron's tracker values are an fp32 tensor
    for (int l = 0; l < layers; ++l) {
      const double v = losses[std::size_t(k) * layers + l];
      m.per_layer.push_back(v);
      sum += static_cast<float>(v);
    }
    m.value = moe_layers > 0 ? sum / static_cast<float>(moe_layers) : 0.0f;
    out.push_back(std::move(m));
  };
  if (a.moe.moe_z_loss_coeff) add("z_loss", 3);
  // The tracker's order: the router saves aux_loss's, then seq_aux_loss's, then global_aux_loss's,
  // whatever the list's order.
  if (config::names_load_balancing_type(a, "aux_loss")) add("load_balancing_loss", 0);
  if (config::names_load_balancing_type(a, "seq_aux_loss")) add("seq_load_balancing_loss", 1);
  if (config::names_load_balancing_type(a, "global_aux_loss")) add("global_load_balancing_loss", 2);
  return out;
}

}  // namespace mactor::training
