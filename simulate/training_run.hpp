// A whole training run as `mactor simulate` prints it, iteration by iteration: under
// --rampup-batch-size the global batch (and so the microbatch count) changes as samples are
// consumed, so each distinct batch is simulated once and the iterations that run it are grouped.
#pragma once

#include <cstdint>
#include <vector>

#include "config/megatron_args.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// Iterations [first, last] (1-based, as Megatron's log counts them) that run one global batch.
struct run_phase {
  std::int64_t first = 1, last = 1;
  std::int64_t global_batch_size = 0;
  std::int64_t num_microbatches = 0;
  double iteration_s = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;
  double tokens_per_second = 0;
};

/// The phases of --train-iters (or --train-samples) iterations. Each distinct batch is simulated
/// once; the run's time is the sum over phases of iterations x iteration time.
std::vector<run_phase> simulate_run(const config::megatron_args& a, const system_spec& system);

}  // namespace mactor::simulate
