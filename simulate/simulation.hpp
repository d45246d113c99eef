// `mactor simulate` end to end for one resolved config: the cost model, one simulated iteration
// of every pipeline rank, the memory of each, and the headline numbers (time, tokens/s, model
// TFLOP/s per accelerator, MFU).
#pragma once

#include <string>
#include <vector>

#include "config/megatron_args.hpp"
#include "schedules/schedule_shape.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/memory_model.hpp"
#include "simulate/pipeline_simulation.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

struct simulation {
  system_spec system;
  schedules::schedule_shape shape;  ///< rank 0's; every rank differs only in pipeline_rank
  cost_model costs;
  iteration_result iteration;
  std::vector<rank_memory> memory;  ///< per pipeline rank
  std::int64_t world_size = 1;
  double tokens_per_iteration = 0;
  double tokens_per_second = 0;
  double model_tflops_per_gpu = 0;  ///< Megatron's --log-throughput number
  double mfu = 0;                   ///< model TFLOP/s per GPU / peak
  double ideal_bubble = 0;          ///< schedules::ideal_bubble_fraction for the shape
};

/// The schedule shape a config runs (Megatron's choice of schedule). Throws std::invalid_argument
/// with the schedule's own messages when it cannot run.
schedules::schedule_shape shape_of(const config::megatron_args& a);

/// The padded vocabulary: --padded-vocab-size, or --vocab-size (50257, GPT-2's, when absent)
/// padded as Megatron pads it.
std::int64_t simulated_vocab(const config::megatron_args& a);

/// Runs the simulation. The config must have passed config::resolve and unsupported_flags.
simulation simulate_config(const config::megatron_args& a, const system_spec& system, bool record_timeline);

}  // namespace mactor::simulate
