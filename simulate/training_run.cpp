// Grouping a run's iterations by global batch and simulating each batch once.
#include "simulate/training_run.hpp"

#include <map>

#include "config/microbatches.hpp"
#include "simulate/simulation.hpp"

namespace mactor::simulate {
namespace {

run_phase simulated_phase(const config::megatron_args& a, const system_spec& system, std::int64_t batch,
                          std::int64_t microbatches) {
  config::megatron_args at = a;
  at.training.global_batch_size = batch;
  at.derived.num_microbatches = microbatches;
  const simulation s = simulate_config(at, system, false);
  run_phase p;
  p.global_batch_size = batch;
  p.num_microbatches = microbatches;
  p.iteration_s = s.iteration.iteration_s;
  p.model_tflops_per_gpu = s.model_tflops_per_gpu;
  p.mfu = s.mfu;
  p.tokens_per_second = s.tokens_per_second;
  return p;
}

}  // namespace

std::vector<run_phase> simulate_run(const config::megatron_args& a, const system_spec& system) {
  const config::microbatch_plan plan = config::microbatch_plan_of(a);
  const std::int64_t iterations = a.training.train_iters ? *a.training.train_iters
                                  : a.training.train_samples ? plan.train_iters_for_samples(*a.training.train_samples)
                                                             : 1;
  std::map<std::int64_t, run_phase> simulated;  // by global batch
  std::vector<run_phase> phases;
  std::int64_t consumed = 0;
  for (std::int64_t it = 1; it <= iterations; ++it) {
    const std::int64_t batch = plan.running_global_batch_size(consumed);
    consumed += batch;
    if (!phases.empty() && phases.back().global_batch_size == batch) {
      phases.back().last = it;
      if (batch == plan.global_batch_size && (!plan.rampup || consumed >= plan.rampup->samples)) {
        phases.back().last = iterations;
        break;
      }
      continue;
    }
    auto found = simulated.find(batch);
    if (found == simulated.end())
      found = simulated.emplace(batch, simulated_phase(a, system, batch, batch / (plan.micro_batch_size * plan.data_parallel_size))).first;
    phases.push_back(found->second);
    phases.back().first = phases.back().last = it;
    // Past the ramp-up every iteration runs the full batch: one phase to the end.
    if (batch == plan.global_batch_size && (!plan.rampup || consumed >= plan.rampup->samples)) {
      phases.back().last = iterations;
      break;
    }
  }
  return phases;
}

}  // namespace mactor::simulate
