// System files: JSON in units people quote (TFLOP/s, GB/s, microseconds, GiB) read into SI units.
#include "simulate/system_spec.hpp"

#include <algorithm>
#include <cmath>
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

// The optional ring_attention_efficiency: [{"chunk_tokens": n, "forward": f, "backward": b}, ...],
// chunk sizes increasing.
std::vector<ring_tile_point> read_ring_tiles(const json& root, const std::string& where) {
  std::vector<ring_tile_point> out;
  if (!root.contains("ring_attention_efficiency")) return out;
  const json& points = root.at("ring_attention_efficiency");
  const std::string inner = where + ": ring_attention_efficiency";
  if (!points.is_array() || points.empty())
    throw std::invalid_argument(inner + " must be a non-empty list of {chunk_tokens, forward, backward}");
  for (const json& p : points) {
    if (!p.is_object()) throw std::invalid_argument(inner + ": each point is an object {chunk_tokens, forward, backward}");
    out.push_back({positive_number(p, "chunk_tokens", inner), positive_number(p, "forward", inner),
                   positive_number(p, "backward", inner)});
    if (out.size() > 1 && !(out.back().chunk_tokens > out[out.size() - 2].chunk_tokens))
      throw std::invalid_argument(inner + ": chunk_tokens must increase from point to point");
  }
  return out;
}

// The optional attention_efficiency {forward, backward}: shares of the peak, into s.
void read_attention_efficiency(const json& root, const std::string& where, system_spec& s) {
  if (!root.contains("attention_efficiency")) return;
  const json& e = root.at("attention_efficiency");
  const std::string inner = where + ": attention_efficiency";
  if (!e.is_object()) throw std::invalid_argument(inner + " must be an object {forward, backward}");
  s.attention_efficiency_forward = positive_number(e, "forward", inner);
  s.attention_efficiency_backward = positive_number(e, "backward", inner);
  if (s.attention_efficiency_forward > 1 || s.attention_efficiency_backward > 1)
    throw std::invalid_argument(inner + ": forward and backward are shares of the peak, at most 1");
}

}  // namespace

ring_tile_point ring_attention_efficiency_at(const system_spec& system, double chunk_tokens) {
  const auto& points = system.ring_attention_efficiency;
  if (points.empty()) return {chunk_tokens, 1, 1};
  if (chunk_tokens <= points.front().chunk_tokens) return {chunk_tokens, points.front().forward, points.front().backward};
  if (chunk_tokens >= points.back().chunk_tokens) return {chunk_tokens, points.back().forward, points.back().backward};
  const auto hi = std::upper_bound(points.begin(), points.end(), chunk_tokens,
                                   [](double c, const ring_tile_point& p) { return c < p.chunk_tokens; });
  const auto lo = hi - 1;
  const double w = std::log(chunk_tokens / lo->chunk_tokens) / std::log(hi->chunk_tokens / lo->chunk_tokens);
  return {chunk_tokens, lo->forward + w * (hi->forward - lo->forward), lo->backward + w * (hi->backward - lo->backward)};
}

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
  s.ring_attention_efficiency = read_ring_tiles(root, where);
  read_attention_efficiency(root, where, s);
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
