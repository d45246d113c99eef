// Trace-event JSON for the simulated timeline.
#include "simulate/timeline_json.hpp"

#include <fstream>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mactor::simulate {

std::string timeline_json(std::span<const timeline_span> spans) {
  using json = nlohmann::ordered_json;
  json events = json::array();
  std::map<std::pair<int, std::string>, int> lanes;
  for (const auto& s : spans) {
    auto [it, added] = lanes.try_emplace({s.rank, s.lane}, static_cast<int>(lanes.size()) + 1);
    if (added) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", s.rank}, {"tid", it->second},
                        {"args", {{"name", s.lane}}}});
      if (s.lane == "compute")
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", s.rank},
                          {"args", {{"name", "pipeline rank " + std::to_string(s.rank)}}}});
    }
    events.push_back({{"ph", "X"}, {"name", s.name}, {"cat", s.lane}, {"pid", s.rank}, {"tid", it->second},
                      {"ts", s.start_s * 1e6}, {"dur", s.duration_s * 1e6}});
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

void write_timeline(const std::string& path, std::span<const timeline_span> spans) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("--simulate-trace " + path + ": cannot write the file");
  out << timeline_json(spans) << '\n';
  if (!out) throw std::runtime_error("--simulate-trace " + path + ": writing failed");
}

}  // namespace mactor::simulate
