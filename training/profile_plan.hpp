// What Megatron's --profile asks of one rank: whether it is profiled (--profile-ranks), which
// training iterations (--profile-step-start, --profile-step-end) and the file its trace goes to.
// Megatron-LM core_v0.15.0 (training.py) has two windows, and both are kept here:
//  - --use-pytorch-profiler: torch.profiler's schedule(wait=start-1, warmup=1, active=end-start),
//    stepped before each iteration, records iterations start .. end-1 (1-based, as logged), and
//    its tensorboard_trace_handler writes "<worker>.<time_ns>.pt.trace.json" into --tensorboard-dir;
//  - without it, the nsys capture range: cudaProfilerStart before the step that makes the
//    iteration count start + 1, cudaProfilerStop after the one that makes it end, so iterations
//    start + 1 .. end. mactor has no nsys and writes its own trace for those iterations instead.
// Without --tensorboard-dir the trace goes to mactor_trace_rank<N>.json in the current folder.
#pragma once

#include <cstdint>
#include <string>

#include "config/megatron_args.hpp"

namespace mactor::training {

struct profile_plan {
  bool enabled = false;              ///< --profile, and this rank is in --profile-ranks
  std::int64_t first = 0, last = -1;  ///< the traced iterations, 1-based, inclusive
  std::string folder;                ///< --tensorboard-dir, or empty: the current folder
  int rank = 0;
  std::string process_name;          ///< "rank 1 (pp 1, tp 0, dp 0)"

  bool covers(std::int64_t iteration) const { return enabled && iteration >= first && iteration <= last; }
  /// The file to write now: <folder>/rank<N>.<time_ns>.pt.trace.json (torch's handler's name
  /// with the rank as worker name), or mactor_trace_rank<N>.json.
  std::string file_path() const;
};

/// This rank's plan from the args; `pp`, `tp`, `dp` are its coordinates, for the process name.
profile_plan profile_plan_of(const config::megatron_args& a, int rank, int pp, int tp, int dp);

/// Creates the plan's folder if missing (as torch's handler does); throws
/// checkpoint::checkpoint_error (exit status 2) naming --tensorboard-dir when it cannot be
/// created or written, so a bad path is found before training rather than at the window's end.
void prepare_profile_folder(const profile_plan& plan);

}  // namespace mactor::training
