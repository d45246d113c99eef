// --log-progress: progress.txt lines in Megatron's format.
#include "training/progress_log.hpp"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace mactor::training {
namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  return out;
}

// Megatron's _get_field: the text after ': '.
std::string field_value(const std::string& field) {
  const auto at = field.find(": ");
  if (at == std::string::npos) throw std::runtime_error("progress.txt: field '" + field + "' has no ': '");
  return field.substr(at + 2);
}

std::chrono::system_clock::time_point parse_local_time(const std::string& text) {
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%d %H:%M:%S");
  if (in.fail()) throw std::runtime_error("progress.txt: '" + text + "' is not a '%Y-%m-%d %H:%M:%S' time");
  tm.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&tm));
}

std::string format_fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

}  // namespace

std::string progress_line(std::chrono::system_clock::time_point now, const std::string& job_id, std::int64_t world_size,
                          const std::string& text) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  return std::string(stamp) + "\tJob ID: " + job_id + "\t# GPUs: " + std::to_string(world_size) + "\t" + text + "\n";
}

progress_start progress_start_of(const std::string& file_text, std::int64_t world_size) {
  std::optional<progress_start> start;
  double latest = 0;
  std::istringstream in(file_text);
  for (std::string line; std::getline(in, line);) {
    const auto fields = split_tabs(line);
    if (fields.size() < 4) continue;
    const std::int64_t world = std::stoll(field_value(fields[2]));
    if (fields[3] == "Saved checkpoint" && fields.size() > 7) latest = std::stod(field_value(fields[7]));
    if (world != world_size) {  // a job of another size: the search starts again
      start.reset();
      continue;
    }
    if (fields[3] == "Starting job" && !start) start = progress_start{parse_local_time(fields[0]), latest};
  }
  if (!start) throw std::runtime_error("progress.txt has no 'Starting job' line for " + std::to_string(world_size) + " ranks");
  return *start;
}

std::string saved_progress_text(const saved_progress& p) {
  const double per_gpu = 1e12 * double(p.world_size);
  const double job = (p.floating_point_operations - p.floating_point_operations_at_start) / (p.job_seconds * per_gpu);
  const double cumulative =
      (p.floating_point_operations - p.cumulative_start_operations) / (p.cumulative_seconds * per_gpu);
  char flops[32];
  std::snprintf(flops, sizeof flops, "%.2e", p.floating_point_operations);
  return std::string(p.async_save ? "Saving async checkpoint" : "Saved checkpoint") + "\tIteration: " +
         std::to_string(p.iteration) + "\tJob throughput: " + format_fixed(job, 1) +
         " TFLOP/s/GPU\tCumulative throughput: " + format_fixed(cumulative, 1) +
         " TFLOP/s/GPU\tFloating-point operations: " + flops + "\tTokens (in billions): " +
         format_fixed(double(p.tokens) / 1e9, 2);
}

void append_progress(const std::string& save_dir, const std::string& line) {
  std::filesystem::create_directories(save_dir);
  std::ofstream out(std::filesystem::path(save_dir) / "progress.txt", std::ios::app);
  out << line;
  if (!out) throw std::runtime_error("cannot append to " + (std::filesystem::path(save_dir) / "progress.txt").string());
}

std::string read_progress(const std::string& save_dir) {
  std::ifstream in(std::filesystem::path(save_dir) / "progress.txt");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mactor::training
