// find_stalls: the coordinator calls it on each snapshot and prints the lines it returns.
#include "inspector/stall_report.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <regex>

namespace mactor::inspector {
namespace {

// The peers an activity waits on: a collective's "with ranks 1, 2, 3", else the first "rank N"
// ("... from rank 12", "to rank 4", "with rank 1").
std::vector<int> peer_ranks(const std::string& activity) {
  static const std::regex members(R"(\bwith ranks (\d+(?:, \d+)*))"), one(R"(\brank (\d+)\b)");
  static const std::regex number(R"(\d+)");
  std::smatch match;
  std::vector<int> peers;
  try {
    if (std::regex_search(activity, match, members)) {
      const std::string list = match[1].str();
      for (auto it = std::sregex_iterator(list.begin(), list.end(), number); it != std::sregex_iterator(); ++it)
        peers.push_back(std::stoi(it->str()));
    } else if (std::regex_search(activity, match, one)) {
      peers.push_back(std::stoi(match[1].str()));
    }
  } catch (const std::out_of_range&) {
    peers.clear();
  }
  return peers;
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

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", s);
  return text;
}

std::string peer_state(const actor_status& p) {
  return "rank " + std::to_string(p.rank) + " " + p.kind + " is: " + p.activity + ", for " +
         seconds_text(p.activity_seconds) + " s";
}

std::string describe(const job_snapshot& snapshot, const actor_status& a) {
  std::string line = "rank " + std::to_string(a.rank) + " " + a.kind + " waits " + seconds_text(a.activity_seconds) +
                     " s: " + a.activity;
  const auto peers = peer_ranks(a.activity);
  if (peers.empty()) return line;
  if (peers.size() == 1) {
    const actor_status* p = find_peer(snapshot, peers[0], a.kind);
    if (!p) return line + " (rank " + std::to_string(peers[0]) + " has no actor in the snapshot)";
    return line + " (" + peer_state(*p) + ")";
  }
  // A collective: the members not in the same call are the ones it waits for.
  const std::string call = a.activity.substr(0, a.activity.find(" of "));
  std::string away, missing, in_it;
  for (int rank : peers) {
    const actor_status* p = find_peer(snapshot, rank, a.kind);
    if (!p)
      missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
    else if (p->activity.rfind(call, 0) == 0)
      in_it += (in_it.empty() ? "" : ", ") + std::to_string(rank);
    else
      away += (away.empty() ? "" : "; ") + peer_state(*p);
  }
  std::string why = away;
  if (!missing.empty()) why += (why.empty() ? "" : "; ") + std::string("no actor in the snapshot for rank(s) ") + missing;
  if (why.empty()) why = "ranks " + in_it + " are in it too";
  return line + " (" + why + ")";
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
