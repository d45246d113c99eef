// Helpers shared by the schedule tests: run a schedule to a list, keep only compute, and a
// virtual-time replay of all ranks that serves as an independent reference for bubbles and
// for the cross-rank consistency of the schedules.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "schedules/action.hpp"
#include "schedules/schedule.hpp"
#include "schedules/schedule_shape.hpp"
#include "schedules/trace_port.hpp"

namespace schedule_test {

using namespace mactor::schedules;

inline std::vector<action> collect(generator<action> g) {
  std::vector<action> out;
  while (auto a = g.next()) out.push_back(*a);
  return out;
}

inline std::vector<action> compute_only(const std::vector<action>& in) {
  std::vector<action> out;
  for (const action& a : in)
    if (is_compute(a.kind)) out.push_back(a);
  return out;
}

inline std::string text(const std::vector<action>& in) { return to_string(in); }

/// `text` of a hand-written action string, normalised (F0 -> F0.0) so strings compare exactly.
inline std::string actions(const char* hand_written) { return to_string(parse_actions(hand_written)); }

/// Result of replaying every rank's compute order in virtual time.
struct replay {
  bool deadlocked = false;
  double makespan = 0;
  std::vector<double> busy;  // per rank
  double bubble(int rank) const { return 1.0 - busy[rank] / makespan; }
};

/// Runs all ranks' compute actions in their schedule order, each as early as its data allows:
/// forward (mb, v) after forward (mb, v - 1) on the previous virtual stage, backward (mb, v)
/// after backward (mb, v + 1) and after this rank's forward (mb, v), a weight-gradient pass (mb, v)
/// after backward (mb, v). A forward on one chunk takes t_forward, a backward t_backward, a
/// weight-gradient pass t_weight; transfers take no time. Reports a deadlock when no rank can
/// move (a schedule whose orders are inconsistent across ranks).
inline replay replay_compute(const schedule_shape& shape, double t_forward, double t_backward,
                             double t_weight = 0.0) {
  const int pp = shape.pipeline_model_parallel_size;
  const int stages = pp * shape.virtual_pipeline_model_parallel_size;
  std::vector<std::vector<action>> ops;
  for (auto& rank_ops : trace_all_ranks(shape)) ops.push_back(compute_only(rank_ops));
  std::map<std::tuple<int, int, int>, double> done;  // (is_backward, mb, stage) -> finish time
  std::vector<std::size_t> next(pp, 0);
  std::vector<double> free_at(pp, 0.0);
  replay out;
  out.busy.assign(pp, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < pp; ++r) {
      while (next[r] < ops[r].size()) {
        const action a = ops[r][next[r]];
        schedule_shape at = shape;
        at.pipeline_rank = r;
        const int stage = virtual_stage(at, a.chunk);
        const bool bwd = a.kind == op::backward;
        const bool weight = a.kind == op::backward_weight;
        double ready = free_at[r];
        std::vector<std::tuple<int, int, int>> deps;
        if (weight) deps.push_back({1, a.microbatch, stage});
        if (!bwd && !weight && stage > 0) deps.push_back({0, a.microbatch, stage - 1});
        if (bwd) deps.push_back({0, a.microbatch, stage});
        if (bwd && stage < stages - 1 && !shape.forward_only) deps.push_back({1, a.microbatch, stage + 1});
        bool blocked = false;
        for (auto& d : deps) {
          auto it = done.find(d);
          if (it == done.end()) {
            blocked = true;
            break;
          }
          ready = std::max(ready, it->second);
        }
        if (blocked) break;
        const double t = bwd ? t_backward : weight ? t_weight : t_forward;
        free_at[r] = ready + t;
        out.busy[r] += t;
        done[{bwd ? 1 : weight ? 2 : 0, a.microbatch, stage}] = free_at[r];
        ++next[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < pp; ++r) {
    if (next[r] < ops[r].size()) out.deadlocked = true;
    out.makespan = std::max(out.makespan, free_at[r]);
  }
  return out;
}

/// Checks the transfers of every rank of a schedule on the V placement (ZB-V, DualPipeV): each
/// receive comes before its compute, each send after it, and every link (from rank, to rank,
/// activation or gradient) carries the same micro-batches in the same order at both ends; the
/// turn of the V stays on the last rank. The rank of a virtual stage is computed here: stage < pp
/// on rank stage, the rest folded back.
inline void check_v_transfers(const schedule_shape& shape) {
  const int pp = shape.pipeline_model_parallel_size;
  const auto rank_of_stage = [pp](int stage) { return stage < pp ? stage : 2 * pp - 1 - stage; };
  std::map<std::tuple<int, int, bool>, std::vector<int>> sends, recvs;
  for (int rank = 0; rank < pp; ++rank) {
    schedule_shape s = shape;
    s.pipeline_rank = rank;
    std::map<std::tuple<op, int, int>, bool> received, computed;
    for (const action& a : collect(make_schedule(s))) {
      const bool gradient = a.kind == op::send_backward || a.kind == op::recv_backward;
      const int stage = virtual_stage(s, a.chunk);
      if (a.kind == op::recv_forward || a.kind == op::recv_backward) {
        received[{gradient ? op::backward : op::forward, a.microbatch, a.chunk}] = true;
        recvs[{rank_of_stage(stage + (gradient ? 1 : -1)), rank, gradient}].push_back(a.microbatch);
      } else if (a.kind == op::send_forward || a.kind == op::send_backward) {
        REQUIRE(computed.count({gradient ? op::backward : op::forward, a.microbatch, a.chunk}));
        sends[{rank, rank_of_stage(stage + (gradient ? -1 : 1)), gradient}].push_back(a.microbatch);
      } else {
        computed[{a.kind, a.microbatch, a.chunk}] = true;
        const bool needs = a.kind == op::forward ? stage > 0 : a.kind == op::backward && stage < 2 * pp - 1;
        if (needs) REQUIRE(received.count({a.kind, a.microbatch, a.chunk}));
      }
    }
  }
  CHECK(sends == recvs);
  CHECK(sends.count({pp - 1, pp - 1, false}) == 1);
}

}  // namespace schedule_test
