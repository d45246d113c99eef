// Pieces of a rank's training state that both checkpoint formats save and load the same way:
// the optimizer's parameters and state tensors, the LR scheduler's and loss scaler's state.
#include "training/checkpoint_state.hpp"

#include "checkpoint/checkpoint_error.hpp"
#include "model/optimizer_adam.hpp"
#include "model/optimizer_sgd.hpp"

namespace mactor::training {

using checkpoint::checkpoint_error;
using json = nlohmann::json;

// The tied embedding's copy on the last stage: the first stage's tensor is the saved one.
bool is_shared_copy(const model::gpt_chunk& chunk, const model::parameter& p) {
  return !chunk.layout().pre_process && p.name == "embedding.word_embeddings.weight";
}

// Megatron's grad_scaler state_dict (scale, growth_tracker, hysteresis_tracker), or null.
json scaler_json(const model::grad_scaler* scaler) {
  if (!scaler) return nullptr;
  const auto st = scaler->state();
  return {{"scale", st.scale}, {"growth_tracker", st.growth_tracker}, {"hysteresis_tracker", st.hysteresis_tracker}};
}

std::vector<optim_slot> optimizer_slots(stage_engine& engine) {
  std::vector<optim_slot> slots;
  for (const auto& o : engine.optimizer().params()) {
    optim_slot slot;
    for (std::size_t c = 0; c < engine.chunks().size(); ++c)
      for (const auto& p : engine.chunks()[c].parameters())
        // The parts of p this rank holds (its shard's with sharded parameters), one of which
        // holds the optimizer's slice.
        for (const auto& h : engine.main_params().held(c, p.offset, p.offset + p.numel))
          if (o.value >= h.values && o.value < h.values + (h.end - h.begin)) {
            auto& chunk = engine.chunks()[c];
            slot.chunk = &chunk;
            slot.param = &p;
            slot.begin = h.begin - p.offset + static_cast<std::size_t>(o.value - h.values);
            slot.end = slot.begin + o.numel;
          }
    if (!slot.param) throw std::logic_error("optimizer parameter " + o.name + " is not in this rank's model");
    slots.push_back(slot);
  }
  return slots;
}

std::vector<state_tensor> state_tensors(model::optimizer& opt, std::size_t i) {
  if (auto* adam = dynamic_cast<model::adam_optimizer*>(&opt))
    return {{"exp_avg", &adam->state()[i].exp_avg, opt.params()[i].where},
            {"exp_avg_sq", &adam->state()[i].exp_avg_sq, opt.params()[i].where}};
  if (auto* sgd = dynamic_cast<model::sgd_optimizer*>(&opt))
    return {{"momentum_buffer", &sgd->state()[i].momentum_buffer, opt.params()[i].where}};
  return {};
}

std::int64_t optimizer_steps(model::optimizer& opt) {
  if (auto* adam = dynamic_cast<model::adam_optimizer*>(&opt))
    for (const auto& s : adam->state()) return s.step;
  return 0;
}

json scheduler_json(const model::lr_scheduler_state& s) {
  return {{"max_lr", s.max_lr},
          {"lr_warmup_steps", s.lr_warmup_steps},
          {"num_steps", s.num_steps},
          {"lr_decay_style", std::string(model::to_string(s.decay_style))},
          {"lr_decay_steps", s.lr_decay_steps},
          {"min_lr", s.min_lr},
          {"start_wd", s.start_wd},
          {"end_wd", s.end_wd},
          {"wd_incr_style", std::string(model::to_string(s.wd_incr_style))},
          {"wd_incr_steps", s.wd_incr_steps}};
}

model::lr_scheduler_state scheduler_from_json(const json& j, const std::string& where) {
  try {
    model::lr_scheduler_state s;
    s.max_lr = j.at("max_lr").get<double>();
    s.lr_warmup_steps = j.at("lr_warmup_steps").get<double>();
    s.num_steps = j.at("num_steps").get<std::int64_t>();
    s.decay_style = model::parse_lr_decay_style(j.at("lr_decay_style").get<std::string>()).value();
    s.lr_decay_steps = j.at("lr_decay_steps").get<std::int64_t>();
    s.min_lr = j.at("min_lr").get<double>();
    s.start_wd = j.at("start_wd").get<double>();
    s.end_wd = j.at("end_wd").get<double>();
    s.wd_incr_style = model::parse_weight_decay_incr_style(j.at("wd_incr_style").get<std::string>()).value();
    s.wd_incr_steps = j.at("wd_incr_steps").get<std::int64_t>();
    return s;
  } catch (const std::exception& e) {
    throw checkpoint_error(where + " has no usable \"opt_param_scheduler\" (" + e.what() +
                           "); pass --no-load-optim to start the LR schedule anew");
  }
}

}  // namespace mactor::training
