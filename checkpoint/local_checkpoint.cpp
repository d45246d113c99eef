// Local non-persistent checkpoints: the rank's directory, what it holds complete, what all hold.
#include "checkpoint/local_checkpoint.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>
#include <system_error>

#include "checkpoint/layout.hpp"

namespace mactor::checkpoint {
namespace fs = std::filesystem;

std::string local_rank_dir(const std::string& dir, int rank) {
  return (fs::path(dir) / ("rank_" + std::to_string(rank))).string();
}

std::vector<std::int64_t> complete_iterations(const std::string& dir) {
  std::vector<std::int64_t> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (const auto it = committed_iteration(e.path().filename().string()); it && e.is_directory(ec))
      found.push_back(*it);
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<std::int64_t> newest_common_iteration(const std::vector<std::vector<std::int64_t>>& per_rank) {
  if (per_rank.empty()) return std::nullopt;
  std::vector<std::int64_t> common = per_rank.front();
  std::sort(common.begin(), common.end());
  for (std::size_t r = 1; r < per_rank.size(); ++r) {
    auto other = per_rank[r];
    std::sort(other.begin(), other.end());
    std::vector<std::int64_t> both;
    std::set_intersection(common.begin(), common.end(), other.begin(), other.end(), std::back_inserter(both));
    common = std::move(both);
  }
  if (common.empty()) return std::nullopt;
  return common.back();
}

}  // namespace mactor::checkpoint
