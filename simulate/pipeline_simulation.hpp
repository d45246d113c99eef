// One simulated training iteration: every pipeline rank's real schedule coroutine driven through
// its own virtual-clock port, then the data-parallel gradient sync and the optimizer step.
// One representative rank per pipeline stage stands for all its data-, tensor- and
// context-parallel peers (they run identical ops on equal shards), so the cost grows with the
// pipeline depth and the number of microbatches, not with the number of accelerators.
#pragma once

#include <functional>
#include <vector>

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/virtual_clock_port.hpp"

namespace mactor::simulate {

/// Makes one rank's schedule; the default is schedules::make_schedule. A new schedule drops in
/// here as long as it yields the action vocabulary of schedules/action.hpp.
using schedule_factory = std::function<schedules::generator<schedules::action>(schedules::schedule_shape)>;

/// How the optimizer-side communication overlaps (Megatron's DDP flags).
struct overlap_settings {
  bool grad_reduce = false;   ///< --overlap-grad-reduce: a chunk's sync starts after its last backward
  bool param_gather = false;  ///< --overlap-param-gather: the all-gather hides in the next forward
};

/// One rank's iteration, activity plus what follows the pipeline.
struct rank_iteration {
  rank_activity pipeline;
  double dp_start_s = 0;       ///< its gradient sync starts (the first bucket)
  double dp_end_s = 0;         ///< and is done
  double exposed_dp_s = 0;     ///< gradient sync and parameter gather not hidden behind compute
  double bubble_fraction = 0;  ///< 1 - busy / pipeline makespan
};

struct iteration_result {
  std::vector<rank_iteration> ranks;  ///< one per pipeline rank
  double pipeline_makespan_s = 0;     ///< last compute end over all ranks
  double iteration_s = 0;             ///< through the optimizer step
  std::vector<timeline_span> timeline;  ///< filled when asked for
};

/// Simulates one iteration of `shape` (its pipeline_rank is ignored: every rank runs).
/// Throws std::logic_error if the ranks' transfers never match (a deadlocked schedule).
iteration_result simulate_iteration(const schedules::schedule_shape& shape, const cost_model& costs,
                                    overlap_settings overlap, bool record_timeline,
                                    const schedule_factory& make = {});

}  // namespace mactor::simulate
