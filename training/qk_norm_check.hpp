// Megatron's --test-mode (Attention.run_realtime_tests): with --qk-layernorm, every tensor- and
// data-parallel rank must hold the same query and key norm weights, a guard against silent
// corruption in memory or on the wire. Compared by hash (training/weight_hash_check.hpp).
#pragma once
#include <vector>

#include "comm/communicator.hpp"
#include "model/gpt_chunk.hpp"
#include "model/group.hpp"

namespace mactor::training {

/// Throws std::runtime_error naming the norm weights that differ and the group (tensor- or
/// data-parallel) they differ in; nothing to check without --qk-layernorm. dp may be null.
void check_qk_norms_across_ranks(std::vector<model::gpt_chunk>& chunks, model::group& tp,
                                 comm::communicator* dp, int rank);

}  // namespace mactor::training
