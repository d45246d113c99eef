// The live inspector, coordinator side: what it keeps of the job for the snapshot (every actor's
// row, the rates, the last iteration's timeline) and the stall report (see inspection.hpp; the
// server is started in inspection_server.cpp, hot swap is in inspection_swap.cpp, the stages'
// side is in stage_reporting.cpp).
#include "actors/inspection.hpp"

#include <algorithm>
#include <stdexcept>

#include "inspector/hang_rule.hpp"
#include "inspector/snapshot_store.hpp"

namespace mactor::actors {

observer_counters& counters_of(const std::string& kind) {
  static observer_counters logger, evaluator;
  if (kind == "logger") return logger;
  if (kind == "evaluator") return evaluator;
  throw std::invalid_argument("no observer counters for '" + kind + "'");
}

double job_inspection::rate_of(const std::string& name, std::int64_t count) {
  auto& r = rates_[name];
  const auto now = clock::now();
  const double dt = std::chrono::duration<double>(now - r.at).count();
  if (dt >= 0.25) {
    r.per_second = count >= r.count ? static_cast<double>(count - r.count) / dt : 0.0;
    r.count = count;
    r.at = now;
  }
  return r.per_second;
}

void job_inspection::rank_joined(int rank, int replica) {
  ranks_.insert(rank);
  hang_->heard_from(rank);  // its clock runs from its hello: a rank stopped before its first report is found too
  inspector::actor_status a;
  a.name = "agent/" + std::to_string(rank);
  a.kind = "agent";
  a.rank = rank;
  a.activity = "watching for stop or abort";
  store_->report(a);
  if (replica >= 0) {
    replicas_[replica] = rank;
    a.name = "replica/" + std::to_string(replica);
    a.kind = "replica";
    a.activity = "waiting for the coordinator";
    store_->report(a);
  }
}

std::int64_t job_inspection::stage_reported(const stage_status& s) {
  ++coordinator_handled_;
  hang_->heard_from(s.rank);
  inspector::actor_status a;
  a.name = "stage/" + std::to_string(s.rank);
  a.kind = "stage";
  a.rank = s.rank;
  a.activity = s.activity;
  a.mailbox_depth = s.mailbox_depth;
  a.messages_per_second = rate_of(a.name, s.messages_handled);
  a.bytes_sent = s.bytes_sent;
  a.bytes_received = s.bytes_received;
  a.memory_allocated = s.memory_allocated;
  a.memory_max_allocated = s.memory_max_allocated;
  a.memory_reserved = s.memory_reserved;
  a.memory_activations = s.memory_activations;
  const auto now = clock::now();
  // When an activity began, from its age when the report left.
  const auto began = [now](double age_s) {
    return now - std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(age_s));
  };
  store_->report(a, began(s.activity_age_s));
  for (const auto& side : s.sides) {
    inspector::actor_status b;
    b.name = side.kind + "/" + std::to_string(s.rank);
    b.kind = side.kind;
    b.rank = s.rank;
    b.activity = side.activity;
    b.mailbox_depth = side.mailbox_depth;
    b.messages_per_second = rate_of(b.name, side.messages_handled);
    store_->report(b, began(side.activity_age_s));
  }
  if (s.timeline_iteration > 0 && s.timeline_iteration == wanted_) {
    auto& events = timelines_[s.rank];
    events.clear();
    for (std::size_t i = 0; i < s.ops.size(); ++i)
      events.push_back({s.rank, s.ops[i], s.microbatches[i], s.chunks[i], s.starts[i], s.ends[i]});
    expert_shares_[s.rank] = {s.expert_routers, s.expert_tokens};
    if (timelines_.size() == ranks_.size()) {  // every rank's share of one iteration: publish it
      std::vector<inspector::timeline_event> all;
      for (const auto& [rank, e] : timelines_) all.insert(all.end(), e.begin(), e.end());
      store_->set_last_iteration_timeline(std::move(all));
      std::vector<inspector::expert_load_share> shares;
      for (auto& [rank, share] : expert_shares_) shares.push_back(std::move(share));
      try {
        if (auto rows = inspector::sum_expert_load(shares); !rows.empty()) store_->set_expert_load(wanted_, std::move(rows));
      } catch (const std::invalid_argument& e) {  // a bug of ours: the inspector shows none, training goes on
        std::fprintf(err_, "mactor: inspector: %s; not shown\n", e.what());
      }
      timelines_.clear();
      expert_shares_.clear();
      wanted_ = 0;
    }
  }
  // A second after the last timeline, ask for one about a second ahead (at the iteration rate
  // seen since the last ask), so that every stage knows before it gets there; a stage that got
  // there first still has it among its recent ones. An ask that came to nothing is dropped.
  if (wanted_ > 0 && completed_ > wanted_ && now - wanted_at_ > std::chrono::seconds(5)) wanted_ = 0;
  if (wanted_ == 0 && completed_ > 0 && now - wanted_at_ > std::chrono::seconds(1)) {
    const double seconds = std::chrono::duration<double>(now - wanted_at_).count();
    const auto per_second = static_cast<std::int64_t>(static_cast<double>(completed_ - completed_at_ask_) / seconds);
    wanted_ = completed_ + 1 + (completed_at_ask_ > 0 ? per_second : 0);
    completed_at_ask_ = completed_;
    wanted_at_ = now;
    timelines_.clear();
    expert_shares_.clear();
  }
  return wanted_;
}

void job_inspection::coordinator_activity(std::string what, std::int64_t iteration) {
  ++coordinator_handled_;
  coordinator_activity_ = std::move(what);
  coordinator_since_ = clock::now();
  completed_ = iteration;
  hang_->iteration(iteration);
  report_coordinator();
  // A replica fans the coordinator's work out to its pipeline and merges what comes back.
  for (const auto& [replica, rank] : replicas_) {
    inspector::actor_status a;
    a.name = "replica/" + std::to_string(replica);
    a.kind = "replica";
    a.rank = rank;
    a.activity = coordinator_activity_ + " on its pipeline";
    store_->report(a, coordinator_since_);
  }
  store_->set_iteration(iteration, train_iters_);
}

void job_inspection::report_observer(const std::string& kind) {
  auto& c = counters_of(kind);
  inspector::actor_status a;
  a.name = kind;
  a.kind = kind;
  a.rank = 0;
  const auto generation = c.generation.load();
  a.activity = kind == "logger" ? "printing the records it is sent" : "planning evaluations";
  if (generation > 0) a.activity += " (swapped in, #" + std::to_string(generation + 1) + ")";
  a.mailbox_depth = c.mailbox.load();
  a.messages_per_second = rate_of(kind, c.handled.load());
  store_->report(a);
}

void job_inspection::report_coordinator() {
  inspector::actor_status c;
  c.name = c.kind = "coordinator";
  c.activity = coordinator_activity_;
  c.mailbox_depth = coordinator_mailbox_;
  c.messages_per_second = rate_of("coordinator", coordinator_handled_);
  store_->report(c, coordinator_since_);
}

double distributed_timeout_s(const config::megatron_args& args, bool after_init) {
  const auto& d = args.distributed;
  double timeout = 60.0 * static_cast<double>(d.distributed_timeout_minutes);
  if (after_init && d.distributed_timeout_seconds_after_init)
    timeout = static_cast<double>(*d.distributed_timeout_seconds_after_init);
  // NVIDIA Resiliency Extension's soft timeout: under --inprocess-restart a rank without progress
  // for it once training runs is hung, and the launcher's in-job restart replaces it (start-up,
  // model building and loading keep the distributed timeout, as they do with
  // --distributed-timeout-seconds-after-init).
  const auto& inprocess = args.inprocess_restart;
  if (after_init && inprocess.inprocess_restart) timeout = std::min(timeout, inprocess.inprocess_soft_timeout);
  return timeout;
}

std::optional<double> after_init_timeout_s(const config::megatron_args& args) {
  if (!args.distributed.distributed_timeout_seconds_after_init && !args.inprocess_restart.inprocess_restart)
    return std::nullopt;
  return distributed_timeout_s(args, true);
}

std::optional<std::string> job_inspection::tick(std::int64_t coordinator_mailbox) {
  coordinator_mailbox_ = coordinator_mailbox;
  report_coordinator();
  report_observer("logger");
  report_observer("evaluator");
  // The stall report: a line when a wait passes the threshold, one more when it is over.
  std::set<std::string> now;
  for (const auto& line : store_->snapshot().stalls) {
    const std::string who = line.substr(0, line.find(" waits "));
    now.insert(who);
    if (!stalled_.count(who)) std::fprintf(err_, "mactor: stall: %s\n", line.c_str());
  }
  for (const auto& who : stalled_)
    if (!now.count(who)) std::fprintf(err_, "mactor: stall over: %s goes on\n", who.c_str());
  if (now != stalled_) std::fflush(err_);
  stalled_ = std::move(now);
  return check_hang();
}

std::optional<std::string> job_inspection::check_hang() {
  const auto lines = hang_->check(store_->snapshot());
  if (lines.empty()) return std::nullopt;
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%g", hang_->timeout_s());
  for (const auto& line : lines) std::fprintf(err_, "mactor: hang: %s\n", line.c_str());
  std::fflush(err_);
  return std::to_string(lines.size()) + " rank(s) made no progress for the distributed timeout (" + timeout +
         " s: --distributed-timeout-minutes, or --distributed-timeout-seconds-after-init after the first "
         "iteration); ending the job: " + lines.front();
}

}  // namespace mactor::actors
