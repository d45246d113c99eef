// Megatron's track_moe_metrics (core_v0.15.0 moe_utils.py, called by training.py's training_log):
// the MoE layers' auxiliary losses of one iteration as the log line and TensorBoard show them.
#pragma once
#include <string>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::training {

struct moe_metric {
  std::string name;                // "z_loss", "load_balancing_loss", "seq_load_balancing_loss"
  float value = 0;                 // the sum over layers / the number of MoE layers (fp32)
  std::vector<double> per_layer;   // every layer's value (--moe-per-layer-logging)
};

/// The tracked names in Megatron's tracker order (z_loss first: the router saves it before the
/// load-balancing loss), from report_losses ([model::moe_aux_loss_kinds * num_layers]:
/// load_balancing_loss, seq_load_balancing_loss, global_load_balancing_loss, z_loss by layer,
/// already divided by the micro-batch count and reduced over the ranks). Empty without --num-experts.
std::vector<moe_metric> moe_metrics(const config::megatron_args& a, const std::vector<double>& report_losses);

/// One MoE layer's tokens per expert in one trained iteration (the top-k choices its router kept,
/// over every micro-batch), as one rank routed them; the live inspector sums the ranks.
struct expert_load {
  std::string router;          // the router's module name, e.g. decoder.layers.3.mlp.router
  std::vector<double> tokens;  // [experts]
};

}  // namespace mactor::training
