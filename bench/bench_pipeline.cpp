// Pipeline bubble benchmark: run under `mactor -np P bench_pipeline [megatron flags]` with
// --pipeline-model-parallel-size P. Each rank runs the training schedule through its stage engine
// (UCX transfers, real compute) and measures, per iteration, the share of the schedule it spent
// waiting for an activation or gradient; rank 0 prints it per rank next to the schedule's ideal
// bubble fraction. Measured idle includes transfer time and the recomputation of out-of-order
// backwards, which the ideal model leaves out.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/launch_env.hpp"
#include "config/resolve.hpp"
#include "schedules/schedule_shape.hpp"
#include "schedules/shape_from_args.hpp"
#include "training/rank_worker.hpp"

int main(int argc, char** argv) {
  using namespace mactor;
  const auto env = comm::detect_launch_env(comm::process_env());
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  auto r = config::resolve(arguments, "bench_pipeline", {env.rank, env.world_size});
  if (r.exit_status) {
    std::fputs(r.err.c_str(), stderr);
    return *r.exit_status;
  }
  const auto& a = r.args;
  training::parallel_context ctx(a, env);
  training::rank_worker worker(a, ctx);
  // Sleep while transfers are in flight, as the stage actor does between resume messages: a
  // spinning driver would take the cores the other stages compute on.
  std::mutex m;
  std::condition_variable cv;
  bool woken = false;
  worker.set_wakeup([&] {
    std::lock_guard lock(m);
    woken = true;
    cv.notify_one();
  });
  const std::int64_t iterations = *a.training.train_iters;
  double idle_sum = 0, span_sum = 0, busy_sum = 0;
  std::int64_t consumed = 0;
  for (std::int64_t it = 1; it <= iterations; ++it) {
    worker.begin_iteration(it, consumed);
    do {  // until the result validation asks for no rerun
      while (!worker.pump()) {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return woken; });
        woken = false;
      }
    } while (worker.rerun_iteration());
    worker.finish_iteration();
    consumed += *a.training.global_batch_size;
    if (it == 1) continue;  // warm-up
    const auto timeline = worker.engine().last_timeline();
    double idle = 0, busy = 0, span = 0;
    for (const auto& e : timeline) {
      (e.waiting ? idle : busy) += e.end_s - e.start_s;
      span = std::max(span, e.end_s);
    }
    idle_sum += idle, busy_sum += busy, span_sum += span;
  }
  schedules::schedule_shape s = schedules::shape_from_args(a);  // with --pipeline-schedule's kind
  s.pipeline_rank = ctx.pp_rank();
  const int world = ctx.world_size();
  std::vector<double> mine = {static_cast<double>(ctx.rank()), static_cast<double>(ctx.pp_rank()), idle_sum, busy_sum, span_sum,
                              schedules::ideal_bubble_fraction(s)};
  std::vector<double> all(mine.size() * world, 0.0);
  if (auto* w = ctx.world())
    w->all_gather(std::span<const double>(mine), std::span<double>(all));
  else
    all = mine;
  if (ctx.rank() == 0) {
    std::printf("pipeline bubble: %s schedule, pp=%d vp=%d microbatches=%d, %lld measured iterations\n",
                schedules::to_string(schedules::resolved_kind(s)), s.pipeline_model_parallel_size,
                s.virtual_pipeline_model_parallel_size, s.num_microbatches, static_cast<long long>(iterations - 1));
    std::printf("%5s %6s %12s %12s %12s %10s %10s\n", "rank", "stage", "iter ms", "busy ms", "idle ms", "idle", "ideal");
    for (int q = 0; q < world; ++q) {
      const double* v = all.data() + q * mine.size();
      const double n = static_cast<double>(std::max<std::int64_t>(1, iterations - 1));
      std::printf("%5d %6d %12.2f %12.2f %12.2f %9.1f%% %9.1f%%\n", static_cast<int>(v[0]), static_cast<int>(v[1]),
                  1e3 * v[4] / n, 1e3 * v[3] / n, 1e3 * v[2] / n, v[4] > 0 ? 100.0 * v[2] / v[4] : 0.0, 100.0 * v[5]);
    }
  }
  ctx.shutdown();
  return 0;
}
