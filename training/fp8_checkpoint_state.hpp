// The delayed fp8 recipe's state in checkpoints: each fp8 linear's amax histories and scales (TE
// keeps them as the module's fp8 extra state, which Megatron's checkpoints carry), so a resumed
// fp8 run quantizes with the scales the uninterrupted run would have. The state is equal over
// the amax group once reduced (model/fp8_amax_reduction.hpp), so one rank saves each linear's and
// every rank holding the linear loads it. A tensor "<weight name>._fp8_state" of 3 x (history + 1)
// floats (input, weight, gradient: history then scale); the per-tensor recipes that scale from the
// tensor itself have no state and save none.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/save.hpp"
#include "model/parameter.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {

/// The checkpoint name of the state of the fp8 linear multiplying `weight`.
std::string fp8_state_name(const std::string& weight);
bool is_fp8_state_name(const std::string& name);

/// The state of each fp8 linear of `chunk` that has one, by its checkpoint name.
std::vector<std::pair<std::string, std::vector<float>>> fp8_states(model::gpt_chunk& chunk);
/// Restores the state of each fp8 linear of `chunk` that `saved` finds (by checkpoint name; none:
/// the linear keeps its fresh state). `where` names the checkpoint in errors.
void restore_fp8_states(model::gpt_chunk& chunk,
                        const std::function<std::optional<std::vector<float>>(const std::string&)>& saved,
                        const std::string& where);

/// Adds the state of each fp8 linear whose weight `saves` accepts.
void append_fp8_states(stage_engine& engine, const std::function<bool(const model::parameter&)>& saves,
                       checkpoint::rank_state& state);

/// Restores each fp8 linear's state the checkpoint holds (a linear without one keeps its fresh
/// state: a checkpoint saved without fp8). Call before the fp8 weights are cast from the main
/// parameters (--fp8-param-gather), which uses the weight's scale.
void restore_fp8_states(stage_engine& engine, const checkpoint::checkpoint_reader& reader, const std::string& where);

}  // namespace mactor::training
