// Non-persistent checkpoint directories and the removal of their older iterations.
#include "checkpoint/non_persistent.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "checkpoint/layout.hpp"

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::checkpoint {
namespace fs = std::filesystem;

std::string non_persistent_dir(const std::optional<std::string>& global_dir, const std::string& base) {
  if (global_dir && !global_dir->empty()) return *global_dir;
  return (fs::path(base) / non_persistent_subdir).string();
}

std::vector<std::int64_t> remove_old_iterations(const std::string& dir, int keep) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (const auto it = committed_iteration(e.path().filename().string()); it && e.is_directory(ec))
      found.emplace_back(*it, e.path());
  std::sort(found.begin(), found.end());
  std::vector<std::int64_t> removed;
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < found.size(); ++i) {
    fs::remove_all(found[i].second, ec);
    if (ec)
      throw checkpoint_error("cannot remove the old non-persistent checkpoint " + found[i].second.string() + ": " +
                             ec.message());
    removed.push_back(found[i].first);
  }
  return removed;
}

}  // namespace mactor::checkpoint
