// render_text: the actor table and the ASCII per-rank timeline (see text_view.hpp).
#include "inspector/text_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "inspector/expert_load.hpp"

namespace mactor::inspector {
namespace {

std::string printf_string(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, args...);
  return buffer;
}

bool is_transfer(const std::string& op) { return op == "RF" || op == "SF" || op == "RB" || op == "SB"; }

std::string label(const timeline_event& e, bool chunked) {
  if (e.microbatch < 0) return e.op;
  std::string text = e.op + std::to_string(e.microbatch);
  if (chunked) text += "." + std::to_string(e.chunk);
  return text;
}

std::string format_duration(double seconds) {
  return seconds < 10 ? printf_string("%.1f ms", seconds * 1e3) : printf_string("%.2f s", seconds);
}

std::string actor_table(const job_snapshot& s) {
  std::size_t activity_width = 8;
  for (const auto& a : s.actors) activity_width = std::max(activity_width, a.activity.size());
  activity_width = std::min<std::size_t>(activity_width, 70);
  const int aw = static_cast<int>(activity_width);
  std::string out = printf_string("%-12s %4s  %-*s %8s %8s %8s %10s %10s %10s %10s %10s\n", "KIND", "RANK", aw,
                                  "ACTIVITY", "FOR (s)", "MAILBOX", "MSGS/S", "SENT", "RECEIVED", "ALLOCATED",
                                  "MAX ALLOC", "RESERVED");
  for (const auto& a : s.actors) {
    std::string activity = a.activity.size() > activity_width
                               ? a.activity.substr(0, activity_width - 3) + "..."
                               : a.activity;
    const auto memory = [&](std::int64_t bytes) { return a.kind == "stage" ? format_bytes(bytes) : std::string("-"); };
    out += printf_string("%-12s %4d  %-*s %8.1f %8lld %8.1f %10s %10s %10s %10s %10s\n", a.kind.c_str(), a.rank, aw,
                         activity.c_str(), a.activity_seconds, static_cast<long long>(a.mailbox_depth),
                         a.messages_per_second, format_bytes(a.bytes_sent).c_str(),
                         format_bytes(a.bytes_received).c_str(), memory(a.memory_allocated).c_str(),
                         memory(a.memory_max_allocated).c_str(), memory(a.memory_reserved).c_str());
  }
  return out;
}

std::string timeline(const job_snapshot& s, int width) {
  std::vector<timeline_event> events;
  for (const auto& e : s.last_iteration_timeline)
    if (!is_transfer(e.op)) events.push_back(e);
  if (events.empty()) return "last iteration timeline: none yet\n";
  std::sort(events.begin(), events.end(),
            [](const auto& a, const auto& b) { return a.start_s < b.start_s; });
  double t0 = events.front().start_s, t1 = t0;
  std::set<int> ranks;
  bool chunked = false;
  for (const auto& e : events) {
    t1 = std::max(t1, e.end_s);
    ranks.insert(e.rank);
    chunked |= e.chunk > 0;
  }
  const double span = std::max(t1 - t0, 1e-12);
  const int columns = std::max(width - 11, 10);  // "rank N   |" + cells + "|"
  auto column = [&](double t) {
    return std::clamp(static_cast<int>(std::lround((t - t0) / span * columns)), 0, columns);
  };
  std::string out = "last iteration timeline (" + format_duration(span) + ", one column = " +
                    format_duration(span / columns) + ")\n";
  for (int rank : ranks) {
    std::string row(columns, ' ');
    for (const auto& e : events) {
      if (e.rank != rank) continue;
      int a = std::min(column(e.start_s), columns - 1), b = std::max(column(e.end_s), a + 1);
      std::string text = label(e, chunked);
      for (int c = a; c < b; ++c)
        row[c] = c - a < static_cast<int>(text.size()) ? text[c - a] : '-';
    }
    out += printf_string("rank %-3d |", rank) + row + "|\n";
  }
  std::string axis_end = format_duration(span);
  out += std::string(10, ' ') + "0" +
         std::string(std::max<int>(1, columns - static_cast<int>(axis_end.size())), ' ') + axis_end + "\n";
  return out;
}

}  // namespace

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? printf_string("%lld B", static_cast<long long>(bytes))
                   : printf_string("%.1f %s", value, units[unit]);
}

std::string render_text(const job_snapshot& s, int width) {
  std::string out = printf_string("mactor job: iteration %lld / %lld   uptime %.1f s   %zu actors\n\n",
                                  static_cast<long long>(s.iteration),
                                  static_cast<long long>(s.train_iters), s.uptime_s, s.actors.size());
  out += actor_table(s) + "\n" + timeline(s, width);
  if (!s.expert_load.empty()) out += "\n" + render_expert_load(s.expert_load_iteration, s.expert_load, width);
  if (!s.stalls.empty()) {
    out += "\nSTALLED:\n";
    for (const auto& line : s.stalls) out += "  " + line + "\n";
  }
  return out;
}

}  // namespace mactor::inspector
