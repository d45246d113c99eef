// Directory and file naming, the tracker file, and clean-up of interrupted saves.
#include "checkpoint/layout.hpp"

#include <cctype>
#include <cstdio>
#include <system_error>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/durable_file.hpp"

namespace mactor::checkpoint {

std::string iteration_dir_name(std::int64_t iteration) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iteration));
  return buf;
}

std::optional<std::int64_t> committed_iteration(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "iter_") != 0 || name.size() > 5 + 18) return std::nullopt;
  for (std::size_t i = 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  return std::stoll(name.substr(5));
}

std::filesystem::path iteration_dir(const std::filesystem::path& save_dir, std::int64_t iteration) {
  return save_dir / iteration_dir_name(iteration);
}

std::filesystem::path temporary_iteration_dir(const std::filesystem::path& save_dir,
                                              std::int64_t iteration, const std::string& attempt) {
  std::string name = iteration_dir_name(iteration) + ".tmp";
  if (!attempt.empty()) {
    name += "-";
    for (char c : attempt)  // keep the name a plain file name whatever the job id holds
      name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  }
  return save_dir / name;
}

std::string shard_file_name(int rank) { return "__" + std::to_string(rank) + "_0.distcp"; }
std::string done_marker_name(int rank) { return "__" + std::to_string(rank) + ".done.json"; }

std::optional<std::int64_t> read_tracker(const std::string& load_dir) {
  const auto path = std::filesystem::path(load_dir) / tracker_file_name;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::string text = read_whole_file(path);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  text = text.substr(start);
  if (text == "release")
    throw checkpoint_error(path.string() +
                           " says \"release\": release checkpoints are not supported; convert it "
                           "with Megatron to an iteration checkpoint, or pass --ckpt-step");
  bool digits = !text.empty() && text.size() < 19;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits)
    throw checkpoint_error(path.string() + " should hold an iteration number but holds \"" +
                           text.substr(0, 40) + "\"; fix or delete it and pass --ckpt-step");
  return std::stoll(text);
}

void write_tracker(const std::string& save_dir, std::int64_t iteration) {
  write_file_atomically(std::filesystem::path(save_dir) / tracker_file_name,
                        std::to_string(iteration));
}

int remove_interrupted_saves(const std::string& save_dir) {
  std::error_code ec;
  int removed = 0;
  if (!std::filesystem::is_directory(save_dir, ec)) return 0;
  for (const auto& e : std::filesystem::directory_iterator(save_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("iter_", 0) != 0) continue;
    if (name.find(".tmp") == std::string::npos && name.find(".old-") == std::string::npos) continue;
    std::filesystem::remove_all(e.path(), ec);
    if (ec)
      throw checkpoint_error("cannot remove the interrupted save " + e.path().string() + ": " +
                             ec.message() + "; remove it by hand");
    ++removed;
  }
  return removed;
}

}  // namespace mactor::checkpoint
