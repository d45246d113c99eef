// The live side of the inspector: what the coordinator keeps of its job for `mactor inspect` and
// the web page, the stall report it prints, hot swap of the logger and the evaluator, and the
// reports a stage sends. inspector/ holds the CAF-free library (store, server, views); this file
// connects it to the actors. Settings come from the environment (see inspector/README.md):
//   MACTOR_INSPECT             off | HOST:PORT | HOST | PORT   (default 127.0.0.1 and a free port)
//   MACTOR_INSPECT_TOKEN_FILE  where the token is written, mode 0600
//                              (default $HOME/.mactor/inspector/<job id>.token)
//   MACTOR_STALL_THRESHOLD     seconds a rank may wait before the coordinator reports it (30)
// Test hook: MACTOR_TEST_STALL_RANK=R and MACTOR_TEST_STALL_AT_ITERATION=I make rank R's stage
// sleep MACTOR_TEST_STALL_SECONDS (default 10) before iteration I.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <caf/fwd.hpp>

#include "actors/inspection_messages.hpp"
#include "config/megatron_args.hpp"
#include "inspector/expert_load.hpp"
#include "inspector/job_snapshot.hpp"

namespace mactor::training {
class stage_engine;
class log_writer;
}
namespace mactor::inspector {
class snapshot_store;
class server;
class hang_rule;
}  // namespace mactor::inspector

namespace mactor::actors {

/// What the logger and the evaluator (on rank 0, next to the coordinator) tell the inspector
/// without sending it anything: counters the coordinator reads when it refreshes the snapshot.
struct observer_counters {
  std::atomic<std::int64_t> handled{0};
  std::atomic<std::int64_t> mailbox{0};  ///< the mailbox's size when the last message was taken
  std::atomic<std::int64_t> generation{0};  ///< how many times it was swapped
};
/// "logger" or "evaluator" (anything else: std::invalid_argument).
observer_counters& counters_of(const std::string& kind);

/// A logger built from a swap's writer; it waits for its predecessor's logger_takeover.
caf::actor spawn_logger_successor(caf::actor_system& sys, std::unique_ptr<training::log_writer> writer, std::FILE* out,
                                  int world_size, std::int64_t padded_vocab_size);
/// The logger that is current (the last successor built, while it runs), else `first`.
caf::actor current_logger(caf::actor_system& sys, const caf::actor& first);
/// Returns once `first` and every logger swapped in after it have quit, so every record they
/// were sent is printed.
void wait_for_loggers(caf::actor_system& sys, const caf::actor& first);

/// Removes the default token file this process wrote, if any (run_job calls it when the job has
/// ended, failed or not: a failing rank 0 ends its process without the coordinator's help).
void remove_inspector_token_file();

/// Status reports are on unless MACTOR_INSPECT=off.
bool inspection_enabled();
/// The exit status of a job whose ranks made no progress for the distributed timeout.
constexpr int hang_exit_code = 18;
/// The distributed timeout Megatron's flags give, in seconds: before the first iteration is done
/// (after_init = false) and after, then never longer than --inprocess-soft-timeout under
/// --inprocess-restart.
double distributed_timeout_s(const config::megatron_args& args, bool after_init);
/// The timeout after the first iteration when the flags make it differ from the one before
/// (--distributed-timeout-seconds-after-init, --inprocess-restart's soft timeout); nullopt otherwise.
std::optional<double> after_init_timeout_s(const config::megatron_args& args);

/// How often a stage reports (0.5 s).
constexpr std::chrono::milliseconds status_interval{500};

/// What an actor of a rank other than the stage is doing (the checkpointer), set by that actor
/// and read by the stage's status actor. Thread-safe.
class side_activity {
 public:
  explicit side_activity(std::string kind) : kind_(std::move(kind)) {}
  /// Called by the actor as it takes a message (`mailbox_depth`: what still waits behind it).
  void set(std::string what, std::int64_t mailbox_depth);
  side_status report() const;

 private:
  mutable std::mutex mu_;
  std::string kind_, activity_ = "idle";
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  std::int64_t mailbox_ = 0, handled_ = 0;
};

/// A stage's side: remembers when the iteration and its optimizer step ran and builds its
/// reports. Thread-safe: the stage actor records, and its status actor (spawn_stage_status)
/// reports every status_interval even while the stage's thread is blocked in a collective.
/// Also holds the test-only stall hook.
class stage_reporter {
 public:
  stage_reporter();
  /// The engine the reports read from (nullptr: none, e.g. while the model is built or once
  /// the stage is about to destroy it). Reports start with the first call.
  void attach(const training::stage_engine* engine);
  bool started() const;
  /// True once the second iteration since start has begun (the first is done).
  bool past_first_iteration() const;
  void iteration_begun(std::int64_t iteration);
  void step_begun();
  /// The iteration's step is over: its timeline joins the recent ones.
  void step_done();
  /// A message handled by the stage, and its mailbox's depth then.
  void handled(std::int64_t mailbox_depth);
  /// The report to send now. It carries the timeline of the iteration the coordinator last
  /// asked for (set_wanted) once, if this stage still has it.
  stage_status make(int rank);
  void set_wanted(std::int64_t iteration);
  /// The test hook: true when this rank is to stall before `iteration` (and for how long).
  std::optional<double> test_stall(int rank, std::int64_t iteration) const;
  /// While set, reports show this activity instead of the engine's.
  void override_activity(std::optional<std::string> what);
  /// Another actor of this rank, reported along with the stage.
  void add_side(std::shared_ptr<const side_activity> side);

 private:
  using clock = std::chrono::steady_clock;
  mutable std::mutex mu_;
  const training::stage_engine* engine_ = nullptr;
  bool started_ = false;
  std::int64_t handled_ = 0, mailbox_ = 0, wanted_ = 0;
  std::int64_t iteration_ = 0, sent_ = 0, iterations_begun_ = 0;
  clock::time_point iteration_start_, step_start_;
  std::deque<stage_status> recent_;  // the last iterations' timelines (only the columns filled)
  stage_status kept_;                // the timeline of the iteration `wanted` named in advance
  std::optional<std::string> override_;
  clock::time_point override_since_;
  std::vector<std::shared_ptr<const side_activity>> sides_;
  int stall_rank_ = -1;
  std::int64_t stall_iteration_ = -1;
  double stall_seconds_ = 10;
};

/// The actor that sends `reporter`'s status to `coordinator` every status_interval (at most one
/// report in flight) once the stage has started it, until it is sent an exit. A rank other than 0
/// whose reports the coordinator leaves unanswered for the timeout and 5 s ends its process with
/// hang_exit_code (rank 0 is stopped or cut off). Spawned by
/// run_job's thread: an actor spawned inside the detached stage would run on that busy thread.
struct hang_timeouts {
  double init_s = 600;
  std::optional<double> after_init_s;
};
caf::actor spawn_stage_status(caf::actor_system& sys, std::shared_ptr<stage_reporter> reporter, int rank,
                              const caf::actor& coordinator, hang_timeouts timeouts);

/// The coordinator's side: the snapshot store, the HTTP server, the stall report and hot swap.
class job_inspection {
 public:
  /// Starts serving per the environment; nullptr when MACTOR_INSPECT=off. Prints the address and
  /// token to `err`. Throws std::invalid_argument for a bad setting (the job exits 2), and
  /// std::runtime_error when it cannot bind or write the token file.
  static std::unique_ptr<job_inspection> start(caf::actor_system& sys, const caf::actor& coordinator,
                                               const config::megatron_args& args, std::FILE* err);
  /// Stops serving (a swap request then in flight gets its answer first: destroy it after the
  /// coordinator has quit, which CAF does with the coordinator's state).
  ~job_inspection();
  /// The job is over: removes the token file this job made (the process may end any moment).
  void job_ended();

  /// A rank's actors said hello (replica < 0: none on this rank).
  void rank_joined(int rank, int replica);
  /// Returns the iteration whose timeline the stage should send next (0: none).
  std::int64_t stage_reported(const stage_status& s);
  void coordinator_activity(std::string what, std::int64_t iteration);
  /// Every status_interval: the observers' rows, and the stall report printed when it changes.
  /// Returns the error that ends the job when ranks made no progress for the distributed timeout
  /// (inspector/hang_rule.hpp; the report naming them is printed first), else nullopt.
  std::optional<std::string> tick(std::int64_t coordinator_mailbox);

  /// Handles a swap request in the coordinator: answers through `promise`, and on success
  /// replaces `logger` or `evaluator` (the coordinator's own handles).
  void swap(caf::event_based_actor* self, const swap_request& r, caf::actor& logger, caf::actor& evaluator,
            caf::response_promise promise);

 private:
  job_inspection(caf::actor_system& sys, const config::megatron_args& args, double stall_threshold_s);
  void report_observer(const std::string& kind);
  void report_coordinator();
  std::optional<std::string> check_hang();

  using clock = std::chrono::steady_clock;
  caf::actor_system& sys_;
  std::int64_t train_iters_ = 0;
  std::string logger_args_, eval_args_;  // the current observers' configs (JSON)
  bool swapping_ = false;
  std::unique_ptr<inspector::snapshot_store> store_;
  std::unique_ptr<inspector::hang_rule> hang_;
  std::unique_ptr<inspector::server> server_;
  std::FILE* err_ = stderr;
  struct rate {
    std::int64_t count = 0;
    clock::time_point at = clock::now();
    double per_second = 0;
  };
  std::map<std::string, rate> rates_;
  // The timeline being collected: iteration wanted_ from every rank, asked for once a second.
  std::int64_t completed_ = 0, wanted_ = 0, completed_at_ask_ = 0;
  clock::time_point wanted_at_;
  std::map<int, std::vector<inspector::timeline_event>> timelines_;
  std::map<int, inspector::expert_load_share> expert_shares_;  // the same iteration's MoE counts
  std::set<int> ranks_;
  std::map<int, int> replicas_;  // replica -> its rank
  std::int64_t coordinator_handled_ = 0, coordinator_mailbox_ = 0;
  std::string coordinator_activity_ = "meeting the ranks";
  clock::time_point coordinator_since_ = clock::now();
  std::set<std::string> stalled_;  // "rank N kind" of the stalls printed
  double rate_of(const std::string& name, std::int64_t count);
};

}  // namespace mactor::actors
