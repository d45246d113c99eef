// The trace-event JSON of one rank: metadata naming the process and its threads, then the spans.
#include "training/trace_file.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::training {
namespace {

using nlohmann::json;

constexpr int training_tid = 1, background_tid = 2, send_tid = 100, recv_tid = 200;

json metadata(const char* what, int pid, std::optional<int> tid, json args) {
  json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", std::move(args)}};
  if (tid) m["tid"] = *tid;
  return m;
}

// The thread id of every event: its track's, the transfers spread over lanes so that no two
// spans of one thread overlap (the first lane free when the transfer was posted).
std::vector<int> thread_ids(std::span<const trace_event> events, int& send_lanes, int& recv_lanes) {
  std::vector<int> tids(events.size(), training_tid);
  std::vector<std::size_t> order(events.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return events[x].start_ns < events[y].start_ns; });
  std::vector<std::int64_t> send_free, recv_free;  // each lane's last end
  for (auto i : order) {
    const auto& e = events[i];
    if (e.track == trace_track::background) tids[i] = background_tid;
    if (e.track != trace_track::send && e.track != trace_track::recv) continue;
    auto& lanes = e.track == trace_track::send ? send_free : recv_free;
    std::size_t lane = 0;
    while (lane < lanes.size() && lanes[lane] > e.start_ns) ++lane;
    if (lane == lanes.size()) lanes.push_back(0);
    lanes[lane] = e.end_ns;
    tids[i] = (e.track == trace_track::send ? send_tid : recv_tid) + static_cast<int>(lane);
  }
  send_lanes = static_cast<int>(send_free.size());
  recv_lanes = static_cast<int>(recv_free.size());
  return tids;
}

void name_threads(json& out, int pid, bool background, int send_lanes, int recv_lanes) {
  auto name = [&](int tid, const std::string& text) {
    out.push_back(metadata("thread_name", pid, tid, {{"name", text}}));
    out.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
  };
  name(training_tid, "training (stage actor)");
  if (background) name(background_tid, "background collectives");
  for (int l = 0; l < send_lanes; ++l) name(send_tid + l, "pipeline send " + std::to_string(l));
  for (int l = 0; l < recv_lanes; ++l) name(recv_tid + l, "pipeline recv " + std::to_string(l));
}

}  // namespace

std::string trace_json(const profile_plan& plan, std::span<const trace_event> events, std::int64_t steady_to_epoch_ns) {
  int send_lanes = 0, recv_lanes = 0;
  const auto tids = thread_ids(events, send_lanes, recv_lanes);
  const bool background = std::any_of(events.begin(), events.end(),
                                      [](const trace_event& e) { return e.track == trace_track::background; });
  json list = json::array();
  list.push_back(metadata("process_name", plan.rank, std::nullopt, {{"name", plan.process_name}}));
  list.push_back(metadata("process_sort_index", plan.rank, std::nullopt, {{"sort_index", plan.rank}}));
  name_threads(list, plan.rank, background, send_lanes, recv_lanes);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    json args = json::object();
    for (std::size_t a = 0; a < e.num_args; ++a) args[e.args[a].key] = e.args[a].value;
    list.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", plan.rank}, {"tid", tids[i]},
                    {"ts", static_cast<double>(e.start_ns + steady_to_epoch_ns) / 1e3},
                    {"dur", static_cast<double>(e.end_ns - e.start_ns) / 1e3}, {"args", std::move(args)}});
  }
  json trace = {{"traceEvents", std::move(list)},
                {"displayTimeUnit", "ms"},
                {"otherData", {{"producer", "mactor --profile"},
                               {"rank", plan.rank},
                               {"first_iteration", plan.first},
                               {"last_iteration", plan.last}}}};
  return trace.dump();
}

void write_trace_file(const std::string& path, const profile_plan& plan, std::span<const trace_event> events) {
  using namespace std::chrono;
  const auto offset = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count() -
                      duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
  const auto text = trace_json(plan, events, offset);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text << '\n';
  out.close();
  if (!out)
    throw checkpoint::checkpoint_error("--profile: cannot write the trace " + path +
                                       "; pass a writable path to --tensorboard-dir");
}

}  // namespace mactor::training
