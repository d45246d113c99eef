// find_stalls: the coordinator calls it on each snapshot and prints the lines it returns.
#include "inspector/stall_report.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <regex>

namespace mactor::inspector {
namespace {

// The first "rank N" in an activity, i.e. the peer it waits on ("... from rank 12", "to rank 4").
std::optional<int> peer_rank(const std::string& activity) {
  static const std::regex pattern(R"(\brank (\d+)\b)");
  std::smatch match;
  if (!std::regex_search(activity, match, pattern)) return std::nullopt;
  try {
    return std::stoi(match[1].str());
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
}

const actor_status* find_peer(const job_snapshot& snapshot, int rank, const std::string& kind) {
  const actor_status* first = nullptr;
  for (const auto& a : snapshot.actors) {
    if (a.rank != rank) continue;
    if (a.kind == kind) return &a;
    if (!first) first = &a;
  }
  return first;
}

std::string describe(const job_snapshot& snapshot, const actor_status& a) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", a.activity_seconds);
  std::string line = "rank " + std::to_string(a.rank) + " " + a.kind + " waits " + seconds +
                     " s: " + a.activity;
  auto peer = peer_rank(a.activity);
  if (!peer) return line;
  const actor_status* p = find_peer(snapshot, *peer, a.kind);
  if (!p) return line + " (rank " + std::to_string(*peer) + " has no actor in the snapshot)";
  std::snprintf(seconds, sizeof seconds, "%.1f", p->activity_seconds);
  return line + " (rank " + std::to_string(p->rank) + " " + p->kind + " is: " + p->activity +
         ", for " + seconds + " s)";
}

}  // namespace

std::vector<std::string> find_stalls(const job_snapshot& snapshot, double threshold_s) {
  std::vector<const actor_status*> stalled;
  for (const auto& a : snapshot.actors)
    if (a.activity.rfind("awaiting", 0) == 0 && a.activity_seconds > threshold_s)
      stalled.push_back(&a);
  std::stable_sort(stalled.begin(), stalled.end(), [](const auto* x, const auto* y) {
    return x->activity_seconds > y->activity_seconds;
  });
  std::vector<std::string> lines;
  for (const auto* a : stalled) lines.push_back(describe(snapshot, *a));
  return lines;
}

}  // namespace mactor::inspector
