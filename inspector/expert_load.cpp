// sum_expert_load and render_expert_load (see expert_load.hpp).
#include "inspector/expert_load.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace mactor::inspector {

std::vector<expert_load_row> sum_expert_load(const std::vector<expert_load_share>& shares) {
  std::map<std::string, std::vector<double>> sums;
  for (const auto& share : shares) {
    if (share.routers.empty()) continue;
    if (share.tokens.size() % share.routers.size() != 0)
      throw std::invalid_argument("expert load: " + std::to_string(share.tokens.size()) + " counts do not split over " +
                                  std::to_string(share.routers.size()) + " routers");
    const std::size_t experts = share.tokens.size() / share.routers.size();
    for (std::size_t r = 0; r < share.routers.size(); ++r) {
      auto [at, fresh] = sums.try_emplace(share.routers[r], experts, 0.0);
      if (at->second.size() != experts)
        throw std::invalid_argument("expert load: " + share.routers[r] + " is counted over " +
                                    std::to_string(at->second.size()) + " and " + std::to_string(experts) + " experts");
      for (std::size_t e = 0; e < experts; ++e) at->second[e] += share.tokens[r * experts + e];
    }
  }
  std::vector<expert_load_row> rows;
  for (auto& [router, tokens] : sums) rows.push_back({router, std::move(tokens)});
  return rows;
}

namespace {

std::string short_name(const std::string& router) {
  const std::string suffix = ".mlp.router";
  if (router.size() > suffix.size() && router.compare(router.size() - suffix.size(), suffix.size(), suffix) == 0)
    return router.substr(0, router.size() - suffix.size());
  return router;
}

}  // namespace

std::string render_expert_load(std::int64_t iteration, const std::vector<expert_load_row>& rows, int width) {
  if (rows.empty()) return "";
  std::size_t name_width = 5;
  for (const auto& r : rows) name_width = std::max(name_width, short_name(r.router).size());
  char line[256];
  std::snprintf(line, sizeof line, "tokens per expert, iteration %lld (max/mean: 1.00 is balanced)\n%-*s %8s  %s\n",
                static_cast<long long>(iteration), int(name_width), "LAYER", "MAX/MEAN", "TOKENS");
  std::string out = line;
  for (const auto& r : rows) {
    double total = 0, most = 0;
    for (double t : r.tokens) total += t, most = std::max(most, t);
    const double mean = r.tokens.empty() ? 0.0 : total / double(r.tokens.size());
    std::snprintf(line, sizeof line, "%-*s %8.2f  ", int(name_width), short_name(r.router).c_str(),
                  mean > 0 ? most / mean : 0.0);
    std::string counts;
    for (double t : r.tokens) {
      char number[32];
      std::snprintf(number, sizeof number, "%s%.0f", counts.empty() ? "" : " ", t);
      counts += number;
    }
    // Long rows (many experts) are cut to the width; the JSON snapshot has every count.
    const std::size_t room = std::size_t(std::max(10, width - int(name_width) - 11));
    if (counts.size() > room) counts = counts.substr(0, room - 3) + "...";
    out += line + counts + "\n";
  }
  return out;
}

}  // namespace mactor::inspector
