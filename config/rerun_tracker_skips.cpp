// The tracker's lines, matched as Megatron's regular expression matches them.
#include "config/rerun_tracker_skips.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "config/python_text.hpp"

namespace mactor::config {
namespace {

// Python's str(status).split(".")[-1].upper().
std::string status_name(const std::string& s) {
  std::string last = s.substr(s.rfind('.') == std::string::npos ? 0 : s.rfind('.') + 1);
  for (auto& ch : last) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return last;
}

}  // namespace

tracker_skips skipped_iterations_from_tracker(const std::string& path) {
  tracker_skips out;
  std::ifstream in(path);
  if (!in) {
    out.error = "[Errno 2] No such file or directory: '" + path + "'";
    return out;
  }
  // The same greedy pattern as Megatron's, searched anywhere in the line.
  static const std::regex line_pattern(
      R"(ts=.+ node=.+ device=.+ jobID=(.+) rank=(.+) iteration=(.+) status=(.+) result=.+ message=.+)");
  std::set<std::int64_t> potentially, ignored;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  std::map<std::string, std::map<std::int64_t, std::set<std::int64_t>>> seen_by_job;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, line_pattern)) continue;
    const auto rank = parse_python_int(m[2].str()), iteration = parse_python_int(m[3].str());
    if (!rank || !iteration) {
      out.error = "invalid literal for int() with base 10: '" + (!rank ? m[2].str() : m[3].str()) + "'";
      break;
    }
    const std::string status = status_name(m[4].str());
    if (status != "RERUN_DISABLED" && status != "FIRST_RERUN_REPRODUCIBLE" && status != "SECOND_RERUN_REPRODUCIBLE")
      continue;
    if (!seen.insert({*rank, *iteration}).second) potentially.insert(*iteration);
    auto& ranks = seen_by_job[m[1].str()][*iteration];
    ranks.insert(*rank);
    if (ranks.size() > 1) ignored.insert(*iteration);
  }
  std::set_difference(potentially.begin(), potentially.end(), ignored.begin(), ignored.end(), std::back_inserter(out.skip));
  out.ignore.assign(ignored.begin(), ignored.end());
  return out;
}

}  // namespace mactor::config
