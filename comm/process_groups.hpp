// Megatron's rank layout: which ranks form each tensor-, context-, data-, pipeline- and
// expert-parallel group, so a rank number means the same thing here as in Megatron-Core.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mactor::comm {

/// The parallel sizes; dp is derived as world / (tp * cp * pp), as Megatron does.
struct parallel_sizes {
  int tp = 1;   ///< --tensor-model-parallel-size
  int pp = 1;   ///< --pipeline-model-parallel-size
  int cp = 1;   ///< --context-parallel-size
  int ep = 1;   ///< --expert-model-parallel-size
  int etp = 0;  ///< --expert-tensor-parallel-size; 0 means "same as tp"
  /// --use-tp-pp-dp-mapping: Megatron's order tp-cp-ep-pp-dp (data parallel slowest) instead
  /// of tp-cp-ep-dp-pp.
  bool tp_pp_dp_mapping = false;
};

/// One rank's coordinates in the dense layout (order tp-cp-dp-pp, tp fastest).
struct rank_coords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

/// One process group: its global ranks in Megatron's order and an id that differs from every
/// other group containing any of the same ranks (feed it to transport_communicator): a kind
/// (5 bits) above the first member's rank (12 bits).
struct group {
  std::vector<int> ranks;
  std::uint32_t id = 0;
};

/// The groups of one rank. Dense: global rank = tp_rank + tp*(cp_rank + cp*(dp_rank +
/// dp*pp_rank)), or tp_rank + tp*(cp_rank + cp*(pp_rank + pp*dp_rank)) with tp_pp_dp_mapping.
/// Experts use the order tp-ep-dp-pp (tp-ep-pp-dp) with etp in place of tp and
/// expert_dp = world / (etp*ep*pp), without cp, exactly like Megatron's expert generator.
class process_groups {
 public:
  /// Throws std::invalid_argument naming the sizes and the rule when the world does not divide.
  process_groups(int world_size, int rank, parallel_sizes sizes);

  int world_size() const { return world_; }
  int rank() const { return rank_; }
  int tp() const { return sizes_.tp; }
  int pp() const { return sizes_.pp; }
  int cp() const { return sizes_.cp; }
  int dp() const { return dp_; }
  int ep() const { return sizes_.ep; }
  int etp() const { return sizes_.etp; }
  int expert_dp() const { return expert_dp_; }

  rank_coords coords() const { return coords_of(rank_); }
  rank_coords coords_of(int rank) const;
  int rank_of(rank_coords c) const;

  group tp_group() const;
  group cp_group() const;
  group dp_group() const;
  group pp_group() const;
  /// Data and context parallel together (Megatron's data-parallel group "with context").
  group dp_cp_group() const;
  /// Tensor and pipeline parallel together (Megatron's model-parallel group).
  group model_parallel_group() const;
  /// Tensor and context parallel together (Megatron's tp_cp group: the ranks holding the parts
  /// of one micro-batch's sequences).
  group tp_cp_group() const;
  /// Tensor, data and context parallel together (Megatron's tp_dp_cp group: the ranks of one
  /// pipeline stage).
  group tp_dp_cp_group() const;
  group ep_group() const;
  group expert_tp_group() const;
  group expert_dp_group() const;
  /// Megatron's hierarchical context-parallel groups (create_hierarchical_groups over the
  /// context-parallel group, --hierarchical-context-parallel-sizes): level l groups sizes[l]
  /// members, those that differ only in the l-th digit of their place in the context-parallel
  /// group written in the sizes' mixed radix (level 0: consecutive members). Throws
  /// std::invalid_argument when the sizes' product is not cp.
  std::vector<group> hierarchical_cp_groups(const std::vector<int>& sizes) const;

  bool is_first_stage() const { return coords().pp == 0; }
  bool is_last_stage() const { return coords().pp == sizes_.pp - 1; }
  /// Neighbours in the pipeline, wrapping around like Megatron's next/prev rank.
  int pipeline_next() const;
  int pipeline_prev() const;

 private:
  enum class kind : std::uint32_t { tp = 1, cp, dp, pp, dp_cp, mp, ep, etp, edp, tp_cp, tp_dp_cp, hcp_level0 = 16 };  // 16 on: one per level (at most 16)
  // Dimensions are named in the order (tp, cp, dp, pp) and its expert counterpart; these map
  // them onto the rank's mixed-radix digits, fastest first.
  std::array<int, 4> radices(const std::array<int, 4>& named) const;
  std::array<int, 4> named_digits(int rank, const std::array<int, 4>& named) const;
  unsigned physical_mask(unsigned named_mask) const;
  group dense_group(kind k, unsigned vary_mask) const;
  group expert_group(kind k, unsigned vary_mask) const;

  int world_;
  int rank_;
  parallel_sizes sizes_;
  int dp_;
  int expert_dp_;
};

}  // namespace mactor::comm
