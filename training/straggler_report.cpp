// straggler_window: Megatron's StragglerDetector min/max report (see straggler_report.hpp).
#include "training/straggler_report.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace mactor::training {
namespace {

// Megatron's _ValueWithRank text: the value with two decimals, its unit, "/", the rank.
std::string with_rank(double value, int rank, const char* unit) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f%s/%d", value, unit, rank);
  return buf;
}

struct rank_values {
  int rank = 0;
  double time_ms = 0, batch_ms = 0, flops = 0;
};

// Python's min() and max() with a key: the first rank holding the extreme value wins a tie.
template <class Key>
const rank_values& first_min(const std::vector<rank_values>& v, Key key) {
  const rank_values* best = &v.front();
  for (const auto& x : v)
    if (key(x) < key(*best)) best = &x;
  return *best;
}
template <class Key>
const rank_values& first_max(const std::vector<rank_values>& v, Key key) {
  const rank_values* best = &v.front();
  for (const auto& x : v)
    if (key(x) > key(*best)) best = &x;
  return *best;
}

}  // namespace

void straggler_window::add(const std::vector<straggler_sample>& samples, double flops) {
  for (const auto& s : samples) {
    if (s.rank < 0) continue;
    if (ranks_.size() <= static_cast<std::size_t>(s.rank)) ranks_.resize(static_cast<std::size_t>(s.rank) + 1);
    auto& r = ranks_[static_cast<std::size_t>(s.rank)];
    r.forward_ms += s.forward_ms;
    r.batch_ms = std::max(r.batch_ms, s.batch_ms);
    r.seen = true;
  }
  flops_ += flops;
}

void straggler_window::clear() {
  ranks_.clear();
  flops_ = 0;
}

std::vector<std::string> straggler_window::report(std::int64_t log_interval, int world, std::int64_t minmax_count,
                                                  const std::string& now) {
  std::vector<rank_values> v;
  const double interval = static_cast<double>(log_interval);
  // Megatron: per-iteration time, per-iteration FLOPs over (time x 1e9 x world), divided by amp
  // (3: only the forward pass is timed).
  const double per_iteration_flops = interval > 0 ? flops_ / interval : 0;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (!ranks_[r].seen) continue;
    rank_values x;
    x.rank = static_cast<int>(r);
    x.time_ms = ranks_[r].forward_ms / interval;
    x.batch_ms = ranks_[r].batch_ms;
    x.flops = x.time_ms > 0 ? per_iteration_flops / (x.time_ms * 1e9 * world) / 3.0 : 0.0;
    v.push_back(x);
  }
  const bool reportable = flops_ > 0 && log_interval > 0 && !v.empty();
  clear();
  if (!reportable) return {};
  const auto time = [](const rank_values& x) { return x.time_ms; };
  const auto batch = [](const rank_values& x) { return x.batch_ms; };
  std::vector<rank_values> by_flops = v;
  std::stable_sort(by_flops.begin(), by_flops.end(), [](const auto& a, const auto& b) { return a.flops < b.flops; });
  const std::string zero_w = with_rank(0, 0, "W"), zero_c = with_rank(0, 0, "C"), zero_u = with_rank(0, 0, "%"),
                    zero_clk = with_rank(0, 0, "MHz");
  char flops_text[128];
  std::snprintf(flops_text, sizeof flops_text, "MnEtpt/Rnk: %.2fTF/%d | MxEtpt/Rnk: %.2fTF/%d", by_flops.front().flops,
                by_flops.front().rank, by_flops.back().flops, by_flops.back().rank);
  const auto& mn = first_min(v, time);
  const auto& mx = first_max(v, time);
  const auto& bmn = first_min(v, batch);
  const auto& bmx = first_max(v, batch);
  std::vector<std::string> lines;
  lines.push_back(now + " | MnRtt/Rnk: " + with_rank(mn.time_ms, mn.rank, "ms") + " | MxRtt/Rnk: " +
                  with_rank(mx.time_ms, mx.rank, "ms") + " | MnPwr/Rnk: " + zero_w + " | MxPwr/Rnk: " + zero_w +
                  " | MnTmp/Rnk: " + zero_c + " | MxTmp/Rnk: " + zero_c + " | MnUtl/Rnk: " + zero_u +
                  " | MxUtl/Rnk: " + zero_u + " | MnClk/Rnk: " + zero_clk + " | MxClk/Rnk: " + zero_clk +
                  " | MnDRtt/Rnk: " + with_rank(bmn.batch_ms, bmn.rank, "ms") + " | MxDRtt/Rnk: " +
                  with_rank(bmx.batch_ms, bmx.rank, "ms") + " | " + flops_text);
  const std::int64_t count = std::max<std::int64_t>(minmax_count, 1);
  const auto n = static_cast<std::int64_t>(by_flops.size());
  if (count > 1 && count < world && count <= n) {
    std::string bottom = "^^^^ Bottom " + std::to_string(count) + " Ranks with lowest  Etpt(TF):";
    for (std::int64_t i = 0; i < count; ++i) bottom += " " + with_rank(by_flops[i].flops, by_flops[i].rank, "") + ",";
    std::string top = "^^^^ Top    " + std::to_string(count) + " Ranks with highest Etpt(TF):";
    for (std::int64_t i = n - count; i < n; ++i) top += " " + with_rank(by_flops[i].flops, by_flops[i].rank, "") + ",";
    lines.push_back(std::move(bottom));
    lines.push_back(std::move(top));
  }
  return lines;
}

std::string straggler_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "[%Y-%m-%d %H:%M:%S]", &local);
  return buf;
}

}  // namespace mactor::training
