// The MoE layers' tokens per expert in one trained iteration, as the live inspector shows them:
// each rank reports what its own routers kept (its tokens: its sequence shard, micro-batches and
// replica), and the coordinator sums the ranks by router, so a user sees routing collapse.
#pragma once

#include <string>
#include <vector>

#include "inspector/job_snapshot.hpp"

namespace mactor::inspector {

/// One rank's share: its routers' names and their counts one after the other.
struct expert_load_share {
  std::vector<std::string> routers;
  std::vector<double> tokens;
};

/// The shares summed by router, in name order. Throws std::invalid_argument when a share's counts
/// do not split evenly over its routers, or two ranks count a router over different experts.
std::vector<expert_load_row> sum_expert_load(const std::vector<expert_load_share>& shares);

/// The text view's table: a line per layer with its router's short name (decoder.layers.3 for
/// decoder.layers.3.mlp.router), its busiest expert's share of the mean load (1.00 when
/// balanced; the number of experts when one expert takes every token) and the counts. Empty
/// without rows.
std::string render_expert_load(std::int64_t iteration, const std::vector<expert_load_row>& rows, int width = 100);

}  // namespace mactor::inspector
