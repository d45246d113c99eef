// JSON both ways for the inspector's snapshot; key names are the struct's field names.
#include "inspector/job_snapshot.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mactor::inspector {

void to_json(nlohmann::json& j, const actor_status& a) {
  j = {{"name", a.name},
       {"kind", a.kind},
       {"rank", a.rank},
       {"activity", a.activity},
       {"activity_seconds", a.activity_seconds},
       {"mailbox_depth", a.mailbox_depth},
       {"messages_per_second", a.messages_per_second},
       {"bytes_sent", a.bytes_sent},
       {"bytes_received", a.bytes_received},
       {"memory_allocated", a.memory_allocated},
       {"memory_max_allocated", a.memory_max_allocated},
       {"memory_reserved", a.memory_reserved},
       {"memory_activations", a.memory_activations}};
}

void from_json(const nlohmann::json& j, actor_status& a) {
  j.at("name").get_to(a.name);
  j.at("kind").get_to(a.kind);
  j.at("rank").get_to(a.rank);
  j.at("activity").get_to(a.activity);
  j.at("activity_seconds").get_to(a.activity_seconds);
  j.at("mailbox_depth").get_to(a.mailbox_depth);
  j.at("messages_per_second").get_to(a.messages_per_second);
  j.at("bytes_sent").get_to(a.bytes_sent);
  j.at("bytes_received").get_to(a.bytes_received);
  // Absent from an older job's snapshots: 0, as for actors that are not stages.
  a.memory_allocated = j.value("memory_allocated", std::int64_t{0});
  a.memory_max_allocated = j.value("memory_max_allocated", std::int64_t{0});
  a.memory_reserved = j.value("memory_reserved", std::int64_t{0});
  a.memory_activations = j.value("memory_activations", std::int64_t{0});
}

void to_json(nlohmann::json& j, const timeline_event& e) {
  j = {{"rank", e.rank},       {"op", e.op},           {"microbatch", e.microbatch},
       {"chunk", e.chunk},     {"start_s", e.start_s}, {"end_s", e.end_s}};
}

void from_json(const nlohmann::json& j, timeline_event& e) {
  j.at("rank").get_to(e.rank);
  j.at("op").get_to(e.op);
  j.at("microbatch").get_to(e.microbatch);
  j.at("chunk").get_to(e.chunk);
  j.at("start_s").get_to(e.start_s);
  j.at("end_s").get_to(e.end_s);
}

void to_json(nlohmann::json& j, const expert_load_row& r) { j = {{"router", r.router}, {"tokens", r.tokens}}; }

void from_json(const nlohmann::json& j, expert_load_row& r) {
  j.at("router").get_to(r.router);
  j.at("tokens").get_to(r.tokens);
}

void to_json(nlohmann::json& j, const job_snapshot& s) {
  j = {{"iteration", s.iteration},
       {"train_iters", s.train_iters},
       {"uptime_s", s.uptime_s},
       {"actors", s.actors},
       {"last_iteration_timeline", s.last_iteration_timeline},
       {"stalls", s.stalls},
       {"expert_load_iteration", s.expert_load_iteration},
       {"expert_load", s.expert_load}};
}

void from_json(const nlohmann::json& j, job_snapshot& s) {
  j.at("iteration").get_to(s.iteration);
  j.at("train_iters").get_to(s.train_iters);
  j.at("uptime_s").get_to(s.uptime_s);
  j.at("actors").get_to(s.actors);
  j.at("last_iteration_timeline").get_to(s.last_iteration_timeline);
  j.at("stalls").get_to(s.stalls);
  // Absent from an older job's snapshots: no expert load.
  s.expert_load_iteration = j.value("expert_load_iteration", std::int64_t{0});
  if (j.contains("expert_load")) j.at("expert_load").get_to(s.expert_load);
}

// Invalid UTF-8 in an activity string is replaced rather than failing the whole snapshot.
std::string to_json_text(const job_snapshot& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

job_snapshot snapshot_from_json_text(std::string_view text) {
  try {
    return nlohmann::json::parse(text).get<job_snapshot>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not a job snapshot: ") + e.what());
  }
}

}  // namespace mactor::inspector
