// In-job restart: the policy read from the program's arguments and the generation files.
#include "tools/launcher/in_job_restart.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "tools/launcher/launch_options.hpp"

namespace mactor::tools {

namespace {

// The value of `flag` at argv[i] ("--flag V" or "--flag=V"), or nullopt when argv[i] is not it.
std::optional<std::string> value_of(const std::vector<std::string>& argv, std::size_t i, const std::string& flag) {
  if (argv[i] == flag && i + 1 < argv.size()) return argv[i + 1];
  if (argv[i].rfind(flag + "=", 0) == 0) return argv[i].substr(flag.size() + 1);
  return std::nullopt;
}

// The integer `text` of a flag, at least `least`; else usage_error(`complaint`).
int integer_at_least(const std::string& text, long least, const std::string& complaint) {
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < least) throw usage_error(complaint);
  return static_cast<int>(n);
}

}  // namespace

in_job_restart_policy in_job_restart_from(const std::vector<std::string>& argv) {
  in_job_restart_policy p;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "--inprocess-restart") p.enabled = true;
    if (const auto v = value_of(argv, i, "--inprocess-max-iterations"))
      p.max_restarts = integer_at_least(
          *v, 0, "--inprocess-max-iterations " + *v + ": the in-job restart limit must be a non-negative integer");
    if (const auto v = value_of(argv, i, "--inprocess-hard-timeout")) {
      char* end = nullptr;
      const double s = std::strtod(v->c_str(), &end);
      if (v->empty() || *end != '\0' || !(s > 0))
        throw usage_error("--inprocess-hard-timeout " + *v + ": give the seconds as a positive number");
      p.hard_timeout_s = s;
    }
    if (const auto v = value_of(argv, i, "--inprocess-active-world-size"))
      p.active_world_size = integer_at_least(
          *v, 1, "--inprocess-active-world-size " + *v + ": give the number of active ranks, at least 1");
  }
  return p;
}

std::string make_restart_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mactor-restart-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw usage_error("cannot create a folder for in-job restarts under " + pattern);
  return pattern;
}

void write_env_file(const std::string& path, const std::vector<std::string>& lines) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& l : lines) out << l << '\n';
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace mactor::tools
