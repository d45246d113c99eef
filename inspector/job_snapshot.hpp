// What the inspector shows of a running job at one instant: every actor's state and the last
// iteration's per-rank timeline. The coordinator fills it; the server and clients move it as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mactor::inspector {

/// One actor on one rank, as the coordinator last heard of it.
struct actor_status {
  std::string name;                    ///< unique within the job, e.g. "stage/3"
  std::string kind;                    ///< "coordinator", "stage", "replica", "logger", "evaluator", "checkpointer"
  int rank = 0;
  std::string activity;                ///< e.g. "awaiting recv_backward mb 7 chunk 1 from rank 12"
  double activity_seconds = 0;         ///< how long it has been in this activity
  std::int64_t mailbox_depth = 0;
  double messages_per_second = 0;
  std::int64_t bytes_sent = 0;         ///< data-plane bytes
  std::int64_t bytes_received = 0;
  /// The rank's memory (stages only; 0 elsewhere), as Megatron's report_memory line reads it:
  /// allocated (tensors and optimizer state) now and at its peak, reserved (resident set), and the
  /// activations now.
  std::int64_t memory_allocated = 0;
  std::int64_t memory_max_allocated = 0;
  std::int64_t memory_reserved = 0;
  std::int64_t memory_activations = 0;
};

/// One op of the last iteration on one rank; times in seconds from the iteration's start.
struct timeline_event {
  int rank = 0;
  std::string op;                      ///< "F", "B", "RF", "SF", "RB", "SB", "opt", "dp-sync", ...
  int microbatch = -1;                 ///< -1 for ops that belong to no microbatch (opt, dp-sync)
  int chunk = 0;                       ///< model chunk (interleaved schedules), 0 otherwise
  double start_s = 0;
  double end_s = 0;
};

/// One MoE layer's tokens per expert in one trained iteration, summed over every rank that routed
/// tokens through it: the top-k choices its router kept, so a user sees routing collapse.
struct expert_load_row {
  std::string router;          ///< the router's module name, e.g. "decoder.layers.3.mlp.router"
  std::vector<double> tokens;  ///< [experts]
};

struct job_snapshot {
  std::int64_t iteration = 0;
  std::int64_t train_iters = 0;
  double uptime_s = 0;
  std::vector<actor_status> actors;
  std::vector<timeline_event> last_iteration_timeline;
  std::vector<std::string> stalls;     ///< find_stalls' lines, filled by the coordinator
  std::int64_t expert_load_iteration = 0;  ///< the iteration expert_load counts (0: none yet)
  std::vector<expert_load_row> expert_load;  ///< a MoE model's layers, in name order
};

// nlohmann_json conversions (found by ADL). from_json throws nlohmann::json::exception naming a
// missing or mistyped key.
void to_json(nlohmann::json& j, const actor_status& a);
void from_json(const nlohmann::json& j, actor_status& a);
void to_json(nlohmann::json& j, const timeline_event& e);
void from_json(const nlohmann::json& j, timeline_event& e);
void to_json(nlohmann::json& j, const expert_load_row& r);
void from_json(const nlohmann::json& j, expert_load_row& r);
void to_json(nlohmann::json& j, const job_snapshot& s);
void from_json(const nlohmann::json& j, job_snapshot& s);

/// The snapshot as JSON text (what GET /api/snapshot answers).
std::string to_json_text(const job_snapshot& s);

/// Parses what to_json_text wrote. Throws std::runtime_error naming the problem on bad input.
job_snapshot snapshot_from_json_text(std::string_view text);

}  // namespace mactor::inspector
