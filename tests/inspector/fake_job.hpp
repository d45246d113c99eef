// A made-up running job for the inspector tests: a P-rank 1F1B iteration with the op times a
// real pipeline would have (forward 1 ms, backward 2 ms, each waiting on its neighbour), actors on
// every rank, and one stage stalled waiting on its successor.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "inspector/job_snapshot.hpp"
#include "inspector/stall_report.hpp"

namespace mactor::inspector::testing {

constexpr double forward_s = 0.001, backward_s = 0.002, optimizer_s = 0.0005;

// Megatron's non-interleaved 1F1B order on one rank: warmup forwards, steady F/B pairs, cooldown.
inline std::vector<std::pair<char, int>> one_f_one_b_order(int ranks, int rank, int microbatches) {
  const int warmup = std::min(ranks - rank - 1, microbatches);
  std::vector<std::pair<char, int>> order;
  for (int mb = 0; mb < warmup; ++mb) order.push_back({'F', mb});
  for (int mb = warmup; mb < microbatches; ++mb) {
    order.push_back({'F', mb});
    order.push_back({'B', mb - warmup});
  }
  for (int mb = microbatches - warmup; mb < microbatches; ++mb) order.push_back({'B', mb});
  return order;
}

// Start each op when its rank is free and its input has arrived: F(mb) after F(mb) on rank-1,
// B(mb) after B(mb) on rank+1 (on the last rank, after its own F(mb)). Then the optimizer step.
inline std::vector<timeline_event> one_f_one_b_timeline(int ranks, int microbatches) {
  std::map<std::tuple<char, int, int>, double> done;  // (op, rank, mb) -> end time
  std::vector<std::vector<std::pair<char, int>>> orders;
  for (int r = 0; r < ranks; ++r) orders.push_back(one_f_one_b_order(ranks, r, microbatches));
  std::vector<std::size_t> next(ranks, 0);
  std::vector<double> free_at(ranks, 0);
  std::vector<timeline_event> events;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      while (next[r] < orders[r].size()) {
        auto [op, mb] = orders[r][next[r]];
        auto dep = op == 'F' ? std::make_tuple('F', r - 1, mb)
                             : (r == ranks - 1 ? std::make_tuple('F', r, mb) : std::make_tuple('B', r + 1, mb));
        bool needs = !(op == 'F' && r == 0);
        if (needs && !done.count(dep)) break;
        double start = std::max(free_at[r], needs ? done[dep] : 0.0);
        double end = start + (op == 'F' ? forward_s : backward_s);
        done[{op, r, mb}] = end;
        free_at[r] = end;
        events.push_back({r, std::string(1, op), mb, 0, start, end});
        ++next[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < ranks; ++r) events.push_back({r, "opt", -1, 0, free_at[r], free_at[r] + optimizer_s});
  return events;
}

inline job_snapshot fake_job(int ranks = 4, int microbatches = 8) {
  job_snapshot s;
  s.iteration = 12;
  s.train_iters = 100;
  s.uptime_s = 34.5;
  s.actors.push_back({"coordinator", "coordinator", 0, "serving the inspector", 34.5, 0, 2.0, 0, 0});
  s.actors.push_back({"logger", "logger", 0, "writing iteration 12", 0.01, 1, 1.0, 0, 0});
  s.actors.push_back({"evaluator", "evaluator", 0, "idle until iteration 20", 3.0, 0, 0.0, 0, 0});
  for (int r = 0; r < ranks; ++r) {
    std::string activity = "forward mb " + std::to_string(r + 2) + " chunk 0";
    double seconds = 0.3;
    if (r == 1) {
      activity = "awaiting recv_backward mb 7 chunk 0 from rank 2";
      seconds = 12.4;
    }
    s.actors.push_back({"stage/" + std::to_string(r), "stage", r, activity, seconds, r,
                        1500.0 + r, 3 * (std::int64_t{1} << 30) + r, 2 * (std::int64_t{1} << 20)});
  }
  s.last_iteration_timeline = one_f_one_b_timeline(ranks, microbatches);
  s.stalls = find_stalls(s, 5.0);
  return s;
}

}  // namespace mactor::inspector::testing
