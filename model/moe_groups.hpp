// The process groups a MoE layer exchanges over besides the tensor-parallel group it is called
// with (whose ranks are also the experts' tensor-parallel ranks when the experts are split).
#pragma once
#include "model/group.hpp"

namespace mactor::model {

struct moe_groups {
  /// The expert-parallel group: the token all-to-all (needed with expert parallelism).
  group* expert_parallel = nullptr;
  /// Megatron's tp_cp group: the ranks holding the other parts of each micro-batch's sequences
  /// (sequence-parallel shards and context-parallel chunks), over which the router's
  /// load-balancing losses count tokens. Null or a group of one: this rank holds them all.
  group* sequence_shards = nullptr;
  /// The experts' tensor-parallel group when its size differs from the tensor-parallel group's
  /// (null: the experts are whole, or split over the tensor-parallel group).
  group* expert_tensor_parallel = nullptr;
  /// Megatron's tp_dp_cp group: every rank routing tokens of the global batch at this stage
  /// (--moe-router-load-balancing-type global_aux_loss counts their tokens). Null: this rank alone.
  group* global_batch = nullptr;
};

}  // namespace mactor::model
