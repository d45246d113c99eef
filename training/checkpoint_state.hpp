// What both checkpoint formats (torch_dist pieces, torch per-rank files) take from a rank's
// training state the same way: the optimizer's parameters and their state tensors, the LR
// scheduler's and the loss scaler's state as Megatron names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/gpt_chunk.hpp"
#include "model/lr_scheduler.hpp"
#include "model/optimizer.hpp"
#include "model/optimizer_adam.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {

/// The tied embedding's copy on the last stage: the first stage's tensor is the saved one.
bool is_shared_copy(const model::gpt_chunk& chunk, const model::parameter& p);

// Where one optimizer param lives: its model parameter and the local elements it covers.
struct optim_slot {
  const model::gpt_chunk* chunk = nullptr;
  const model::parameter* param = nullptr;
  std::size_t begin = 0, end = 0;
};

/// Each optimizer param's model parameter and range, in the optimizer's order.
std::vector<optim_slot> optimizer_slots(stage_engine& engine);

// One optimizer state tensor of a param, under torch's name: kept in fp32, or in a smaller dtype
// (--use-precision-aware-optimizer), on the parameter's device. Megatron's distributed optimizer saves the
// latter as TE FusedAdam's get_unscaled_state gives it, fp32, and loads it through
// set_scaled_state, which rescales and rounds it back into its dtype: the same here. A bf16 state
// comes back bit for bit; an fp16 or fp8 one is rescaled from its values' absmax.
struct state_tensor {
  std::string kind;
  model::scaled_state* scaled = nullptr;
  tensor::device where = tensor::cpu;  // the parameter's: a state loaded before the first step goes there

  bool empty() const { return scaled->empty(); }
  std::vector<float> values() const {
    std::vector<float> v(scaled->size());
    scaled->unscale(v);
    return v;
  }
  /// The fp32 values without a copy where they are kept so, else unscaled into `scratch`.
  const float* data(std::vector<float>& scratch) const {
    if (const float* kept = scaled->fp32_data()) return kept;
    scratch.resize(scaled->size());
    scaled->unscale(scratch);
    return scratch.data();
  }
  void assign(std::vector<float> v) {
    if (scaled->empty() && where != tensor::cpu) scaled->zero(v.size(), where);
    scaled->set(v);
  }
};

/// Optimizer param i's state tensors (Adam: exp_avg, exp_avg_sq; SGD: momentum_buffer).
std::vector<state_tensor> state_tensors(model::optimizer& opt, std::size_t i);
/// Adam's step count (0 for SGD or before the first step).
std::int64_t optimizer_steps(model::optimizer& opt);
/// Megatron's grad_scaler state_dict (scale, growth_tracker, hysteresis_tracker), or null.
nlohmann::json scaler_json(const model::grad_scaler* scaler);
/// Megatron's opt_param_scheduler state_dict, and back (checkpoint_error naming `where`).
nlohmann::json scheduler_json(const model::lr_scheduler_state& s);
model::lr_scheduler_state scheduler_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace mactor::training
