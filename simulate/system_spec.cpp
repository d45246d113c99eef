// System files: JSON in units people quote (TFLOP/s, GB/s, microseconds, GiB) read into SI units.
#include "simulate/system_spec.hpp"

#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mactor::simulate {
namespace {

using json = nlohmann::json;

double positive_number(const json& parent, const char* key, const std::string& where) {
  if (!parent.contains(key) || !parent.at(key).is_number())
    throw std::invalid_argument(where + ": field '" + key + "' is missing or not a number");
  const double v = parent.at(key).get<double>();
  if (!(v > 0)) throw std::invalid_argument(where + ": field '" + key + "' must be positive");
  return v;
}

link_spec read_link(const json& root, const char* key, const std::string& where) {
  if (!root.contains(key) || !root.at(key).is_object())
    throw std::invalid_argument(where + ": object '" + std::string(key) +
                                "' is missing (give bandwidth_GBps and latency_us)");
  const json& link = root.at(key);
  const std::string inner = where + ": " + key;
  return {positive_number(link, "latency_us", inner) * 1e-6, positive_number(link, "bandwidth_GBps", inner) * 1e9};
}

}  // namespace

system_spec parse_system_json(const std::string& text, const std::string& where) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(where + ": not valid JSON: " + e.what());
  }
  system_spec s;
  s.name = root.value("name", where);
  s.peak_flops_bf16 = positive_number(root, "peak_tflops_bf16", where) * 1e12;
  s.peak_flops_fp32 = positive_number(root, "peak_tflops_fp32", where) * 1e12;
  s.compute_efficiency = positive_number(root, "compute_efficiency", where);
  s.memory_bytes = positive_number(root, "memory_GiB", where) * 1024.0 * 1024.0 * 1024.0;
  s.memory_bandwidth_Bps = positive_number(root, "memory_bandwidth_GBps", where) * 1e9;
  s.accelerators_per_node = static_cast<int>(positive_number(root, "accelerators_per_node", where));
  s.intra_node = read_link(root, "intra_node", where);
  s.inter_node = read_link(root, "inter_node", where);
  s.collective_efficiency = positive_number(root, "collective_efficiency", where);
  if (root.contains("memory_efficiency")) s.memory_efficiency = positive_number(root, "memory_efficiency", where);
  if (root.contains("compute_jitter")) s.compute_jitter = positive_number(root, "compute_jitter", where);
  if (root.contains("sync_jitter_us")) s.sync_jitter_s = positive_number(root, "sync_jitter_us", where) * 1e-6;
  if (s.compute_jitter >= 1) throw std::invalid_argument(where + ": compute_jitter is a coefficient of variation, below 1");
  if (s.compute_efficiency > 1 || s.collective_efficiency > 1 || s.memory_efficiency > 1)
    throw std::invalid_argument(where + ": compute_efficiency, collective_efficiency and memory_efficiency are shares, at most 1");
  return s;
}

system_spec read_system_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--system " + path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_system_json(text.str(), "--system " + path);
}

system_spec ideal_system(double flops, int per_node) {
  const double inf = std::numeric_limits<double>::infinity();
  system_spec s;
  s.name = "ideal";
  s.peak_flops_bf16 = s.peak_flops_fp32 = flops;
  s.memory_bytes = inf;
  s.memory_bandwidth_Bps = inf;
  s.accelerators_per_node = per_node;
  s.intra_node = s.inter_node = {0, inf};
  return s;
}

}  // namespace mactor::simulate
