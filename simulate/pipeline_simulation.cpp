// The driver: pulls each rank's coroutine while its port can make progress, round-robin over the
// ranks, until every schedule is done. Virtual time lives in the ports and links, so the order in
// which ranks are visited changes nothing but how often a blocked rank is retried.
#include "simulate/pipeline_simulation.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "schedules/schedule.hpp"

namespace mactor::simulate {
namespace {

namespace sch = mactor::schedules;

struct rank_driver {
  sch::generator<sch::action> schedule;
  virtual_clock_port port;
  std::optional<sch::action> pending;
  bool done = false;

  // Runs actions until one must wait or the schedule ends; true if anything ran.
  bool advance() {
    bool progressed = false;
    while (!done) {
      if (!pending) pending = schedule.next();
      if (!pending) {
        done = true;
        return true;
      }
      if (!port.try_execute(*pending)) return progressed;
      pending.reset();
      progressed = true;
    }
    return progressed;
  }
};

// The gradient sync of each chunk on the rank's data-parallel stream, after the pipeline, or with
// --overlap-grad-reduce bucket by bucket (one bucket per layer) as the chunk's last backward
// produces them, layer after layer (Megatron starts a bucket's reduce when its grads are ready).
void finish_rank(const std::vector<chunk_cost>& chunks, overlap_settings overlap, rank_iteration& r) {
  const rank_activity& p = r.pipeline;
  std::vector<std::size_t> order(chunks.size());
  for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](auto x, auto y) { return p.grads_ready_s[x] < p.grads_ready_s[y]; });
  double stream = overlap.grad_reduce ? 0.0 : p.pipeline_end_s;
  double gather = 0;
  r.dp_start_s = overlap.grad_reduce && !order.empty() ? p.last_backward_start_s[order.front()] : p.pipeline_end_s;
  for (std::size_t c : order) {
    gather += chunks[c].param_gather_s;
    if (!overlap.grad_reduce) {
      stream += chunks[c].dp_sync_s;
      continue;
    }
    const int buckets = std::max(1, chunks[c].layers);
    const double start = p.last_backward_start_s[c], span = p.grads_ready_s[c] - start;
    for (int b = 1; b <= buckets; ++b)
      stream = std::max(stream, start + span * b / buckets) + chunks[c].dp_sync_s / buckets;
  }
  r.dp_end_s = std::max(stream, p.pipeline_end_s);
  r.exposed_dp_s = r.dp_end_s - p.pipeline_end_s + (overlap.param_gather ? 0.0 : gather);
}

}  // namespace

iteration_result simulate_iteration(const sch::schedule_shape& shape, const cost_model& costs,
                                    overlap_settings overlap, bool record_timeline, const schedule_factory& make) {
  const int pp = shape.pipeline_model_parallel_size;
  iteration_result out;
  link_table links(costs.p2p_seconds);
  std::vector<rank_driver> drivers;
  drivers.reserve(std::size_t(pp));
  for (int r = 0; r < pp; ++r) {
    sch::schedule_shape s = shape;
    s.pipeline_rank = r;
    drivers.push_back({make ? make(s) : sch::make_schedule(s),
                       virtual_clock_port(s, costs, links, record_timeline ? &out.timeline : nullptr), {}, false});
  }
  for (bool all_done = false; !all_done;) {
    bool progressed = false;
    all_done = true;
    for (auto& d : drivers) {
      progressed = d.advance() || progressed;
      all_done = all_done && d.done;
    }
    if (!all_done && !progressed)
      throw std::logic_error("simulated pipeline deadlocked: every rank waits for a transfer no rank sends");
  }
  for (int r = 0; r < pp; ++r) {
    drivers[std::size_t(r)].port.flush();
    rank_iteration it;
    it.pipeline = drivers[std::size_t(r)].port.activity();
    out.pipeline_makespan_s = std::max(out.pipeline_makespan_s, it.pipeline.compute_end_s);
    finish_rank(costs.chunks[std::size_t(r)], overlap, it);
    if (record_timeline && it.dp_end_s > it.dp_start_s)
      out.timeline.push_back({r, "dp", "gradient sync", it.dp_start_s, it.dp_end_s - it.dp_start_s});
    out.ranks.push_back(std::move(it));
  }
  // The optimizer step starts everywhere after the slowest rank's sync (the gradient-norm
  // all-reduce spans every rank).
  double synced = 0, step = 0, tail = 0;
  for (int r = 0; r < pp; ++r) {
    auto& it = out.ranks[std::size_t(r)];
    it.bubble_fraction = out.pipeline_makespan_s > 0 ? 1 - it.pipeline.busy_s / out.pipeline_makespan_s : 0;
    synced = std::max(synced, it.dp_end_s);
    step = std::max(step, costs.optimizer_s[std::size_t(r)]);
    tail = std::max(tail, it.exposed_dp_s - (it.dp_end_s - it.pipeline.pipeline_end_s));  // the un-overlapped gather
  }
  out.iteration_s = synced + step + tail;
  return out;
}

}  // namespace mactor::simulate
