// The messages of the live inspection and of hot swap (see inspection.hpp). Includes CAF: include
// only from actors/ sources.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mactor::training {
class log_writer;
}

namespace mactor::actors {

/// Another actor of a rank, reported with its stage's status (e.g. the checkpointer).
struct side_status {
  std::string kind;
  std::string activity;
  double activity_age_s = 0;
  std::int64_t mailbox_depth = 0;
  std::int64_t messages_handled = 0;
};

/// Stage -> coordinator (a request): what this rank's stage is doing, every status_interval while
/// it can answer, at most one report in flight per stage (so the coordinator's mailbox holds at
/// most one per rank). The answer (std::int64_t) names the iteration whose timeline the
/// coordinator wants; the stage's next report carries it (all ranks the same iteration).
struct stage_status {
  int rank = 0;
  std::string activity;
  double activity_age_s = 0;  ///< how long the activity had lasted when the report left
  std::int64_t mailbox_depth = 0;
  std::int64_t messages_handled = 0;
  std::int64_t bytes_sent = 0, bytes_received = 0;
  std::int64_t memory_allocated = 0, memory_max_allocated = 0, memory_reserved = 0, memory_activations = 0;
  std::int64_t timeline_iteration = 0;  ///< 0: no timeline in this report
  // The last iteration's ops, as parallel columns (seconds from the schedule's start).
  std::vector<std::string> ops;
  std::vector<int> microbatches, chunks;
  std::vector<double> starts, ends;
  // The same iteration's tokens per expert, each MoE router's as this rank routed them: the
  // routers' names, and their counts one after the other (every router has the same experts).
  std::vector<std::string> expert_routers;
  std::vector<double> expert_tokens;
  std::vector<side_status> sides;  ///< this rank's other actors that report through the stage's status
};

/// The server's swap callback -> coordinator (local): replace the logger ("logger") or the
/// evaluator ("eval") with one built from these flags over the job's. Answer: swap_answer.
struct swap_request {
  std::string target;
  std::vector<std::string> flags;
};
struct swap_answer {
  bool ok = false;
  std::string message;
};

/// Coordinator -> logger (request; local): build a successor logger from these flags (the text
/// of the config, as config_json writes it). Answer: the successor, which waits for logger_handover.
struct logger_successor_request {
  std::string args_json;
};
/// Coordinator -> old logger, after the last record it sends it: hand the interval state to the
/// successor and exit.
struct logger_handover {
  caf::actor successor;
};
/// Old logger -> successor: the interval state travels inside the old writer (same process).
struct logger_takeover {
  std::shared_ptr<training::log_writer> old_writer;
};

using status_tick_atom = caf::atom_constant<caf::atom("mstatustk")>;
using inspect_tick_atom = caf::atom_constant<caf::atom("minspectk")>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, side_status& x) {
  return f(caf::meta::type_name("mactor::side_status"), x.kind, x.activity, x.activity_age_s, x.mailbox_depth,
           x.messages_handled);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_status& x) {
  return f(caf::meta::type_name("mactor::stage_status"), x.rank, x.activity, x.activity_age_s, x.mailbox_depth,
           x.messages_handled, x.bytes_sent, x.bytes_received, x.memory_allocated, x.memory_max_allocated,
           x.memory_reserved, x.memory_activations, x.timeline_iteration, x.ops, x.microbatches, x.chunks,
           x.starts, x.ends, x.expert_routers, x.expert_tokens, x.sides);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, swap_request& x) {
  return f(caf::meta::type_name("mactor::swap_request"), x.target, x.flags);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, swap_answer& x) {
  return f(caf::meta::type_name("mactor::swap_answer"), x.ok, x.message);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, logger_successor_request& x) {
  return f(caf::meta::type_name("mactor::logger_successor_request"), x.args_json);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, logger_handover& x) {
  return f(caf::meta::type_name("mactor::logger_handover"), x.successor);
}

}  // namespace mactor::actors

// The takeover carries a pointer: it never leaves rank 0's process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mactor::actors::logger_takeover)
