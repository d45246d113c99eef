// --log-straggler: Megatron-Core's StragglerDetector report (megatron/core/utils.py) over one log
// interval. Every rank times its forward computations (the model call of each micro-batch, the
// batch's loading left out) and its batch loading; at each log interval rank 0 prints the
// fastest and slowest rank of each metric and each rank's estimated throughput, in Megatron's
// format. mactor runs on CPUs: the GPU's power, temperature, utilization and clock are 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mactor::training {

/// One rank's share of one training iteration.
struct straggler_sample {
  int rank = 0;
  double forward_ms = 0;  ///< the forward computations' time, summed over the micro-batches
  double batch_ms = 0;    ///< the longest batch load of the iteration
};

class straggler_window {
 public:
  /// Adds one iteration: each rank's forward time is summed and its batch time kept at its max
  /// (Megatron's elapsed()); `flops` is the iteration's model FLOPs.
  void add(const std::vector<straggler_sample>& samples, double flops);
  /// Megatron's report: the "MnRtt/Rnk" line, then, when 1 < minmax_count < world, the bottom
  /// and top minmax_count ranks by throughput. `now` is the "[YYYY-MM-DD HH:MM:SS]" stamp.
  /// Empty when nothing was added (Megatron reports only with FLOPs and an interval). Clears
  /// the window either way.
  std::vector<std::string> report(std::int64_t log_interval, int world, std::int64_t minmax_count,
                                  const std::string& now);
  void clear();

 private:
  struct per_rank {
    double forward_ms = 0, batch_ms = 0;
    bool seen = false;
  };
  std::vector<per_rank> ranks_;
  double flops_ = 0;
};

/// "[2025-01-01 12:00:00]" for now, local time (Python's datetime.now()).
std::string straggler_timestamp();

}  // namespace mactor::training
