// Gluing the cost model, the virtual clock and the memory model for one config.
#include "simulate/simulation.hpp"

#include <stdexcept>

#include "config/validate.hpp"
#include "schedules/shape_from_args.hpp"

namespace mactor::simulate {

schedules::schedule_shape shape_of(const config::megatron_args& a) {
  const schedules::schedule_shape s = schedules::shape_from_args(a);
  if (auto errors = schedules::validate(s); !errors.empty()) {
    std::string text;
    for (const auto& e : errors) text += (text.empty() ? "" : "\n") + e;
    throw std::invalid_argument(text);
  }
  return s;
}

std::int64_t simulated_vocab(const config::megatron_args& a) {
  if (a.tokenizer.padded_vocab_size) return *a.tokenizer.padded_vocab_size;
  return config::padded_vocab_size(a.tokenizer.vocab_size.value_or(50257), a);
}

simulation simulate_config(const config::megatron_args& a, const system_spec& system, bool record_timeline) {
  simulation out;
  out.system = system;
  out.shape = shape_of(a);
  out.costs = build_cost_model(a, system, simulated_vocab(a));
  const overlap_settings overlap{a.distributed.overlap_grad_reduce, a.distributed.overlap_param_gather};
  out.iteration = simulate_iteration(out.shape, out.costs, overlap, record_timeline);
  for (std::size_t r = 0; r < out.costs.chunks.size(); ++r)
    out.memory.push_back(memory_of(a, out.costs.chunks[r], out.iteration.ranks[r].pipeline.peak_activation_bytes));
  out.world_size = a.derived.world_size;
  out.tokens_per_iteration = static_cast<double>(a.training.global_batch_size.value_or(1)) * static_cast<double>(*a.data.seq_length);
  const double t = out.iteration.iteration_s;
  out.tokens_per_second = out.tokens_per_iteration / t;
  out.model_tflops_per_gpu = out.costs.model_flops_per_iteration / (t * 1e12 * static_cast<double>(out.world_size));
  out.mfu = out.model_tflops_per_gpu * 1e12 / out.costs.peak_flops;
  out.ideal_bubble = schedules::ideal_bubble_fraction(out.shape);
  return out;
}

}  // namespace mactor::simulate
