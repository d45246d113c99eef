// Where each virtual pipeline stage runs: which pipeline rank, and which of its model chunks.
// Megatron's interleaving deals the stages round-robin (stage v on rank v % pp); the V shape of
// zero-bubble schedules (ZB-V, Qi et al. 2024; DualPipeV) folds them back, so rank r holds stages r and
// 2 pp - 1 - r and rank 0 holds both the embedding and the loss.
#pragma once

#include <string_view>

namespace mactor::config {

enum class stage_placement {
  interleaved,  ///< stage v on rank v % pp, chunk v / pp (Megatron's layer order)
  v_shape,      ///< two chunks per rank: stage v < pp on rank v, stage v >= pp on rank 2 pp - 1 - v
};

/// The placement a --pipeline-schedule name implies: the V shape for "zbv" and "dualpipev", else
/// interleaved.
inline stage_placement placement_for_schedule(std::string_view schedule) {
  return schedule == "zbv" || schedule == "dualpipev" ? stage_placement::v_shape : stage_placement::interleaved;
}

/// The virtual stage that `chunk` of pipeline rank `rank` runs.
inline int virtual_stage_of(stage_placement p, int pp, int rank, int chunk) {
  if (p == stage_placement::v_shape && chunk % 2 == 1) return (chunk + 1) * pp - 1 - rank;
  return chunk * pp + rank;
}

/// Where virtual stage `stage` runs.
struct stage_position {
  int rank = 0;
  int chunk = 0;
};
inline stage_position position_of_stage(stage_placement p, int pp, int stage) {
  const int chunk = stage / pp, offset = stage % pp;
  if (p == stage_placement::v_shape && chunk % 2 == 1) return {pp - 1 - offset, chunk};
  return {offset, chunk};
}

}  // namespace mactor::config
