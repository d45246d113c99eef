// Actor-messaging overhead per microbatch. Run under `mactor -np P bench_actor_overhead [megatron
// flags]` (or alone, one rank). The same model, data and schedule train three ways on every rank:
//   (a) plain: a loop calls rank_worker::pump() and sleeps on the engine's wakeup between
//       transfers (no actors, no control messages; what bench_pipeline does);
//   (b) stage actor: actors/' stage actor, woken by one resume_message per completed transfer,
//       driven by a scoped actor in its replica's place (run_iteration in, the report back).
//       (a) and (b) alternate iteration by iteration, each with its own model copy;
//   (c) run_job: actors::run_job, as pretrain_gpt runs it, afterwards: the coordinator starts each
//       iteration through the replica actors, reports travel back over CAF (across processes
//       through the middleman) and the logger prints each iteration's line.
// Rank 0 prints the median time per iteration of each and the difference per microbatch, and
// CAF's raw message latencies next to a plain condition-variable hand-off (timed first, while the
// other ranks wait).
// Flags: the usual Megatron ones; --log-interval is forced to 1 (run_job's per-iteration time is
// read from its log line, 0.1 ms resolution). --train-iters counts per way; the first two
// iterations of each are warm-up.
#include <unistd.h>

#include <algorithm>
#include <caf/all.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/job.hpp"
#include "actors/config_message.hpp"
#include "actors/inspect.hpp"
#include "actors/inspection.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "actors/type_ids.hpp"
#include "comm/launch_env.hpp"
#include "config/resolve.hpp"
#include "training/rank_worker.hpp"

namespace {

using namespace mactor;
using clock_type = std::chrono::steady_clock;
constexpr int warmup_iterations = 2;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// (a) The schedule driven by a plain loop that sleeps on the engine's wakeup.
class plain_driver {
 public:
  plain_driver(const config::megatron_args& a, training::parallel_context& ctx) : worker_(a, ctx) {
    worker_.set_wakeup([this] {
      std::lock_guard lock(m_);
      woken_ = true;
      ++wakeups_;
      cv_.notify_one();
    });
  }
  // Seconds from begin_iteration to the end of finish_iteration.
  double run(std::int64_t iteration, std::int64_t consumed) {
    const auto start = clock_type::now();
    worker_.begin_iteration(iteration, consumed);
    do {  // until the result validation asks for no rerun
      while (!worker_.pump()) {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return woken_; });
        woken_ = false;
      }
    } while (worker_.rerun_iteration());
    worker_.finish_iteration();
    return seconds_since(start);
  }
  long wakeups() {
    std::lock_guard lock(m_);
    return wakeups_;
  }

 private:
  training::rank_worker worker_;
  std::mutex m_;
  std::condition_variable cv_;
  bool woken_ = false;
  long wakeups_ = 0;
};

// (b) The stage actor of actors/, driven as its replica actor drives it: a run_iteration message
// in, the iteration report back; in between, one resume_message per transfer completion.
class stage_actor_driver {
 public:
  stage_actor_driver(const config::megatron_args& a, training::parallel_context& ctx) {
    // Left alive, like run_job's: a detached actor's thread may outlive a destroyed system.
    auto* cfg = new caf::actor_system_config;
    actors::configure_rank_system(*cfg);  // as run_job configures it
    sys_ = new caf::actor_system(*cfg);
    self_ = std::make_unique<caf::scoped_actor>(*sys_);
    stage_ = actors::spawn_stage(*sys_, ctx, std::make_shared<actors::job_control>(), caf::actor{},
                                 std::make_shared<actors::stage_reporter>());
    (*self_)->send(stage_, actors::config_message{a});
    (*self_)->receive([](actors::stage_ready&) {}, [](actors::abort_job& e) { fail(e); });
  }
  double run(std::int64_t iteration, std::int64_t consumed) {
    const auto start = clock_type::now();
    (*self_)->send(stage_, actors::run_iteration{iteration, consumed});
    (*self_)->receive([](training::iteration_report&) {}, [](actors::abort_job& e) { fail(e); });
    return seconds_since(start);
  }
  void stop() {
    (*self_)->send(stage_, actors::stop_message{});
    self_.reset();
    stage_ = caf::actor{};
  }

 private:
  [[noreturn]] static void fail(const actors::abort_job& e) {
    std::fprintf(stderr, "bench_actor_overhead: error: %s\n", e.message.c_str());
    std::_Exit(e.exit_code);
  }
  caf::actor_system* sys_ = nullptr;
  std::unique_ptr<caf::scoped_actor> self_;
  caf::actor stage_;
};

// (c) The same through the whole actor runtime; rank 0 reads each iteration's time from its log lines.
std::vector<double> run_actors(const config::megatron_args& a, const comm::launch_env& env,
                               training::parallel_context& ctx, int& exit_code) {
  std::FILE* log = std::tmpfile();
  const auto outcome = actors::run_job(a, env, ctx, log);
  exit_code = outcome.exit_code;
  if (outcome.exit_code != 0) std::fprintf(stderr, "bench_actor_overhead: error: %s\n", outcome.error.c_str());
  std::vector<double> seconds;
  std::fflush(log);
  std::rewind(log);
  char line[4096];
  const std::string key = "elapsed time per iteration (ms): ";
  int seen = 0;
  while (std::fgets(line, sizeof line, log)) {
    const std::string l(line);
    const auto at = l.find(key);
    if (at == std::string::npos) continue;
    if (++seen > warmup_iterations) seconds.push_back(std::atof(l.c_str() + at + key.size()) / 1e3);
  }
  std::fclose(log);
  return seconds;
}

// --- raw latencies (rank 0 alone, before the runs) ---------------------------------------------

struct latency {
  double mean_us = 0, median_us = 0;
};

latency summarize(const std::vector<double>& s) { return {1e6 * mean(s), 1e6 * median(s)}; }

// A thread wakes another through a condition variable and waits to be woken back: what the plain
// loop pays per transfer completion (there one way; here there and back).
latency condvar_round_trip(int n) {
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;  // 1: the partner's turn, 0: ours; -1: stop
  std::thread partner([&] {
    std::unique_lock lock(m);
    for (;;) {
      cv.wait(lock, [&] { return turn != 0; });
      if (turn < 0) return;
      turn = 0;
      cv.notify_all();
    }
  });
  std::vector<double> s;
  for (int i = 0; i < n; ++i) {
    const auto t = clock_type::now();
    std::unique_lock lock(m);
    turn = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return turn == 0; });
    s.push_back(seconds_since(t));
  }
  {
    std::lock_guard lock(m);
    turn = -1;
  }
  cv.notify_all();
  partner.join();
  return summarize(s);
}

// A plain thread (as UCX's progress thread does on a completion) sends a resume_message to a
// detached actor, whose handler wakes the thread back through a condition variable.
latency anon_send_to_detached(caf::actor_system& sys, int n) {
  std::mutex m;
  std::condition_variable cv;
  bool handled = false;
  auto actor = sys.spawn<caf::detached>([&]() -> caf::behavior {
    return {[&](actors::resume_message&) {
      std::lock_guard lock(m);
      handled = true;
      cv.notify_one();
    }};
  });
  std::vector<double> s;
  for (int i = 0; i < n; ++i) {
    const auto t = clock_type::now();
    caf::anon_send(actor, actors::resume_message{});
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return handled; });
    handled = false;
    s.push_back(seconds_since(t));
  }
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return summarize(s);
}

// Two actors bounce a resume_message: `first` on the scheduler (like the replica), the other
// detached (like a stage). Round trip = two message deliveries.
latency actor_ping_pong(caf::actor_system& sys, int n, bool both_detached) {
  auto ponger = sys.spawn<caf::detached>([]() -> caf::behavior {
    return {[](actors::resume_message& m) { return m; }};
  });
  std::vector<double> s;
  s.reserve(n);
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  auto pinger_body = [&, ponger](caf::event_based_actor* self) -> caf::behavior {
    auto count = std::make_shared<int>(0);
    auto t = std::make_shared<clock_type::time_point>(clock_type::now());
    self->send(ponger, actors::resume_message{});
    return {[&, self, count, t, ponger](actors::resume_message&) {
      s.push_back(seconds_since(*t));
      if (++*count == n) {
        std::lock_guard lock(m);
        done = true;
        cv.notify_one();
        self->quit();
        return;
      }
      *t = clock_type::now();
      self->send(ponger, actors::resume_message{});
    }};
  };
  caf::actor pinger = both_detached ? sys.spawn<caf::detached>(pinger_body) : sys.spawn(pinger_body);
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
  }
  caf::anon_send_exit(ponger, caf::exit_reason::user_shutdown);
  return summarize(s);
}

constexpr int latency_round_trips = 20000;

struct latencies {
  latency condvar, anon_send, scheduled_detached, detached_detached;
};

latencies measure_latencies() {
  // Left alive: a CAF 0.17 detached actor's thread may end after the system that ran it is gone
  // and then reads the dead system (a crash in actor_system::thread_terminates, seen here).
  auto* cfg = new caf::actor_system_config;
  actors::configure_rank_system(*cfg);  // as run_job configures it
  auto& sys = *new caf::actor_system(*cfg);
  constexpr int n = latency_round_trips;
  latencies l;
  l.condvar = condvar_round_trip(n);
  l.anon_send = anon_send_to_detached(sys, n);
  l.scheduled_detached = actor_ping_pong(sys, n, false);
  l.detached_detached = actor_ping_pong(sys, n, true);
  return l;
}

void print_latencies(const latencies& l) {
  std::printf("\nraw latencies in one process (%d round trips each)   mean us  median us\n", latency_round_trips);
  std::printf("  thread -> thread -> thread (condition variable)   %8.2f %10.2f\n", l.condvar.mean_us,
              l.condvar.median_us);
  std::printf("  thread -anon_send(resume)-> detached actor -cv->  %8.2f %10.2f\n", l.anon_send.mean_us,
              l.anon_send.median_us);
  std::printf("  scheduled actor <-resume-> detached actor         %8.2f %10.2f\n", l.scheduled_detached.mean_us,
              l.scheduled_detached.median_us);
  std::printf("  detached actor <-resume-> detached actor          %8.2f %10.2f\n", l.detached_detached.mean_us,
              l.detached_detached.median_us);
}

}  // namespace

int main(int argc, char** argv) {
  // As pretrain_gpt: ranks sharing cores must not spin between kernels (see README, "Notes").
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);
  }
  comm::launch_env env;
  try {
    env = comm::detect_launch_env(comm::process_env());
  } catch (const comm::launch_env_error& e) {
    std::fprintf(stderr, "bench_actor_overhead: error: %s\n", e.what());
    return 2;
  }
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  auto r = config::resolve(arguments, "bench_actor_overhead", {env.rank, env.world_size});
  if (r.exit_status) {
    std::fputs(r.err.c_str(), stderr);
    return *r.exit_status;
  }
  config::megatron_args a = r.args;
  if (*a.training.train_iters <= warmup_iterations) {
    std::fprintf(stderr, "bench_actor_overhead: error: --train-iters %lld leaves nothing to measure after %d warm-up "
                 "iterations; give at least %d\n", static_cast<long long>(*a.training.train_iters), warmup_iterations,
                 warmup_iterations + 3);
    return 2;
  }
  a.training.log_interval = 1;
  training::parallel_context ctx(a, env);

  // First, while the other ranks wait for rank 0's first transfer: after a multi-rank run_job
  // returns, its actor system must not outlive the next thread exit (see the end of main).
  latencies raw;
  if (ctx.rank() == 0) raw = measure_latencies();
  // (a) and (b) alternate iteration by iteration (which goes first alternates too), so a change
  // in the machine's load falls on both alike.
  std::vector<double> plain_s, stage_s;
  long wakeups = 0;
  {
    plain_driver plain(a, ctx);
    stage_actor_driver stage(a, ctx);
    std::int64_t consumed = 0;
    long wakeups_before = 0;
    for (std::int64_t it = 1; it <= *a.training.train_iters; ++it) {
      if (it == warmup_iterations + 1) wakeups_before = plain.wakeups();
      double p, q;
      if (it % 2) {
        p = plain.run(it, consumed);
        q = stage.run(it, consumed);
      } else {
        q = stage.run(it, consumed);
        p = plain.run(it, consumed);
      }
      if (it > warmup_iterations) {
        plain_s.push_back(p);
        stage_s.push_back(q);
      }
      consumed += *a.training.global_batch_size;
    }
    wakeups = plain.wakeups() - wakeups_before;
    stage.stop();
  }
  int exit_code = 0;
  const std::vector<double> job_s = run_actors(a, env, ctx, exit_code);
  if (exit_code != 0) std::_Exit(exit_code);
  if (ctx.rank() == 0) {
    const double microbatches = static_cast<double>(a.derived.num_microbatches);
    const double plain_ms = 1e3 * median(plain_s);
    std::printf("actor-messaging overhead: %d ranks (pp=%lld tp=%lld dp=%lld), %lld microbatches per iteration, "
                "%zu measured iterations each, rank 0's times\n",
                ctx.world_size(), static_cast<long long>(a.distributed.pipeline_model_parallel_size),
                static_cast<long long>(a.distributed.tensor_model_parallel_size),
                static_cast<long long>(a.derived.data_parallel_size), static_cast<long long>(a.derived.num_microbatches),
                plain_s.size());
    std::printf("%-48s %10s %10s %14s %14s\n", "driver", "median ms", "mean ms", "ms/microbatch", "extra us/mb");
    auto row = [&](const char* name, const std::vector<double>& v) {
      const double ms = 1e3 * median(v);
      std::printf("%-48s %10.2f %10.2f %14.3f %14.1f\n", name, ms, 1e3 * mean(v), ms / microbatches,
                  1e3 * (ms - plain_ms) / microbatches);
    };
    row("(a) plain loop: pump(), sleep on the wakeup", plain_s);
    row("(b) stage actor: resume_message per wakeup", stage_s);
    row("(c) run_job: + coordinator, replica, logger", job_s);
    std::printf("rank 0's engine wakeups (= resume messages to its stage actor) per iteration: %.1f\n"
                "(a), (b): begin_iteration to the end of finish_iteration, alternating; (b) driven by a scoped actor\n"
                "in the replica's place. (c) afterwards: the log line's elapsed time per iteration (0.1 ms steps),\n"
                "control crossing processes through CAF's middleman. extra us/mb: (median - (a)'s) / microbatches.\n",
                static_cast<double>(wakeups) / static_cast<double>(std::max<std::size_t>(1, plain_s.size())));
    print_latencies(raw);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // run_job leaves a multi-rank actor system up (actors/job.hpp) whose config was local to it:
  // a thread of it ending later would crash, so end at once, as pretrain_gpt does.
  std::_Exit(0);
}
