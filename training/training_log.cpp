// Megatron's training log text. Python's format specs are reproduced with printf (both round
// the exact binary value correctly) plus Python's spellings of inf and nan.
#include "training/training_log.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <stdexcept>

namespace mactor::training {

std::string python_format_exp(double v, int precision) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v < 0 ? "-INF" : "INF";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*E", precision, v);
  return buf;
}

std::string python_format_fixed(double v, int precision) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[512];  // DBL_MAX has 309 integer digits; precision stays small here
  std::snprintf(buf, sizeof buf, "%.*f", std::clamp(precision, 0, 100), v);
  return buf;
}

std::string python_format_int(std::int64_t v, int width) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%*lld", width, static_cast<long long>(v));
  return buf;
}

std::string log_timestamp(std::chrono::system_clock::time_point when) {
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

void training_log_accumulator::add_iteration(std::span<const std::pair<std::string, float>> losses,
                                             bool skipped) {
  if (!skipped) ++advanced_;
  skipped_ += skipped ? 1 : 0;
  bool got_nan = false;
  for (const auto& [key, value] : losses) {
    if (skipped) {
      got_nan = got_nan || std::isnan(value) || std::isinf(value);
      continue;
    }
    auto it = std::find_if(sums_.begin(), sums_.end(), [&](const auto& s) { return s.first == key; });
    if (it == sums_.end()) sums_.emplace_back(key, value);
    else it->second = it->second + value;  // fp32, as Megatron's CUDA tensor sum
  }
  nan_ += got_nan ? 1 : 0;
}

void training_log_accumulator::add_tracked(const std::string& key, float value) {
  auto it = std::find_if(sums_.begin(), sums_.end(), [&](const auto& s) { return s.first == key; });
  if (it == sums_.end()) sums_.emplace_back(key, value);
  else it->second = it->second + value;
}

std::vector<std::pair<std::string, double>> training_log_accumulator::loss_averages() const {
  std::vector<std::pair<std::string, double>> out;
  const double n = static_cast<double>(std::max<std::int64_t>(1, advanced_));
  for (const auto& [key, sum] : sums_) out.emplace_back(key, static_cast<double>(sum) / n);
  return out;
}

void training_log_accumulator::reset() {
  for (auto& s : sums_) s.second = 0.0f;
  advanced_ = skipped_ = nan_ = 0;
}

std::string format_training_log_line(const training_log_line& l) {
  std::string s = " [" + l.timestamp + "]";
  s += " iteration " + python_format_int(l.iteration, 8) + "/" +
       python_format_int(l.train_iters, 8) + " |";
  s += " consumed samples: " + python_format_int(l.consumed_train_samples, 12) + " |";
  if (l.skipped_train_samples > 0)
    s += " skipped samples: " + python_format_int(l.skipped_train_samples, 12) + " |";
  s += " elapsed time per iteration (ms): " +
       python_format_fixed(l.elapsed_time_per_iteration * 1000.0, 1) + " |";
  if (l.throughput)
    s += " throughput per GPU (TFLOP/s/GPU): " + python_format_fixed(*l.throughput, 1) + " |";
  if (l.energy_per_gpu && l.power_per_gpu) {
    s += " energy per GPU (J/iter/GPU): " + python_format_fixed(*l.energy_per_gpu, 1) + " |";
    s += " power per GPU (W/GPU): " + python_format_fixed(*l.power_per_gpu, 1) + " |";
  }
  s += " learning rate: " + python_format_exp(l.learning_rate, 6) + " |";
  if (l.decoupled_learning_rate)
    s += " decoupled learning rate: " + python_format_exp(*l.decoupled_learning_rate, 6) + " |";
  s += " global batch size: " + python_format_int(l.global_batch_size, 5) + " |";
  for (const auto& [key, avg] : l.loss_averages)
    if (avg > 0.0) s += " " + key + ": " + python_format_exp(avg, 6) + " |";
  s += " loss scale: " + python_format_fixed(l.loss_scale, 1) + " |";
  if (l.grad_norm) s += " grad norm: " + python_format_fixed(*l.grad_norm, 3) + " |";
  if (l.num_zeros_in_grad) s += " num zeros: " + python_float_repr(*l.num_zeros_in_grad) + " |";
  if (l.params_norm) s += " params norm: " + python_format_fixed(*l.params_norm, 3) + " |";
  s += " number of skipped iterations: " + python_format_int(l.skipped_iterations, 3) + " |";
  s += " number of nan iterations: " + python_format_int(l.nan_iterations, 3) + " |";
  return s;
}

namespace {
// Megatron's reduce_max_stat_across_model_parallel_group carries the value in an fp32 tensor.
double through_fp32(double v) { return static_cast<double>(static_cast<float>(v)); }
}  // namespace

training_log_line make_training_log_line(const training_log_inputs& in,
                                         const training_log_accumulator& acc) {
  training_log_line l;
  l.timestamp = in.timestamp;
  l.iteration = in.iteration;
  l.train_iters = in.train_iters;
  l.consumed_train_samples = in.consumed_train_samples;
  l.skipped_train_samples = in.skipped_train_samples;
  const double iterations =
      static_cast<double>(acc.advanced_iterations() + acc.skipped_iterations());
  l.elapsed_time_per_iteration = in.interval_seconds / iterations;
  const double world = static_cast<double>(in.world_size);
  if (in.flops_per_iteration)
    l.throughput = *in.flops_per_iteration / (l.elapsed_time_per_iteration * 1e12 * world);
  if (in.energy_joules) {
    l.energy_per_gpu = (*in.energy_joules / iterations) / world;
    l.power_per_gpu = *l.energy_per_gpu / l.elapsed_time_per_iteration;
  }
  l.learning_rate = through_fp32(in.learning_rate);
  l.decoupled_learning_rate = in.decoupled_learning_rate;
  l.global_batch_size = in.global_batch_size;
  l.loss_averages = acc.loss_averages();
  l.loss_scale = in.loss_scale;
  if (in.grad_norm) l.grad_norm = through_fp32(*in.grad_norm);
  if (in.num_zeros_in_grad) l.num_zeros_in_grad = through_fp32(*in.num_zeros_in_grad);
  l.params_norm = in.params_norm;
  l.skipped_iterations = acc.skipped_iterations();
  l.nan_iterations = acc.nan_iterations();
  return l;
}

std::string training_log_interval(const training_log_inputs& in, training_log_accumulator& acc) {
  std::string line = format_training_log_line(make_training_log_line(in, acc));
  acc.reset();
  return line;
}

void validation_loss_accumulator::add(const std::string& key, float numerator, float denominator) {
  auto it = std::find_if(sums_.begin(), sums_.end(), [&](const auto& s) { return s.first == key; });
  if (it == sums_.end()) {
    sums_.push_back({key, {numerator, denominator}});
  } else {
    it->second.first = it->second.first + numerator;
    it->second.second = it->second.second + denominator;
  }
}

loss_entries validation_loss_accumulator::values() const {
  loss_entries out;
  for (const auto& [key, nd] : sums_) out.emplace_back(key, nd.first / nd.second);
  return out;
}

std::string format_validation_block(std::string_view prefix,
                                    std::span<const std::pair<std::string, float>> values,
                                    std::optional<int> set_index) {
  std::string s = " validation";
  if (set_index) s += "-" + std::to_string(*set_index);
  s += " loss at " + std::string(prefix) + " | ";
  for (const auto& [key, value] : values) {
    const double v = value;
    s += key + " value: " + python_format_exp(v, 6) + " | ";
    s += key + " PPL: " + python_format_exp(std::exp(std::min(20.0, v)), 6) + " | ";
  }
  const std::string dashes(s.size() + 1, '-');
  return dashes + "\n" + s + "\n" + dashes;
}

std::optional<timing_log_option> parse_timing_log_option(std::string_view text) {
  if (text == "max") return timing_log_option::max;
  if (text == "minmax") return timing_log_option::minmax;
  if (text == "all") return timing_log_option::all;
  return std::nullopt;
}

namespace {

// (name + ' ').ljust(48, '.')
std::string dotted(const std::string& name) {
  std::string s = name + " ";
  if (s.size() < 48) s.append(48 - s.size(), '.');
  return s;
}

std::optional<std::string> min_max_block(std::span<const timer_reading> timers, bool max_only,
                                         double normalizer) {
  std::string out = max_only ? "max time across ranks (ms):" : "(min, max) time across ranks (ms):";
  bool any = false;
  for (const timer_reading& t : timers) {
    float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
    bool found = false;
    for (double seconds : t.seconds_by_rank) {
      const float f = static_cast<float>(seconds);  // Megatron gathers into an fp32 tensor
      if (!(f > 0.0f)) continue;
      found = true;
      lo = std::min(lo, f);
      hi = std::max(hi, f);
    }
    if (!found) continue;
    any = true;
    const double scale = normalizer / 1000.0;
    out += "\n    ";
    out += dotted(t.name);
    out += ": ";
    if (max_only) {
      out += python_format_fixed(hi / scale, 2);
    } else {
      out += "(" + python_format_fixed(lo / scale, 2) + ", " + python_format_fixed(hi / scale, 2) +
             ")";
    }
  }
  if (!any) return std::nullopt;
  return out;
}

std::optional<std::string> all_ranks_block(std::span<const timer_reading> timers,
                                           double normalizer) {
  std::string out = "times across ranks (ms):";
  bool any = false;
  const float scale = static_cast<float>(normalizer / 1000.0);  // fp32 tensor / python float
  for (const timer_reading& t : timers) {
    bool named = false;
    for (std::size_t rank = 0; rank < t.seconds_by_rank.size(); ++rank) {
      const float f = static_cast<float>(t.seconds_by_rank[rank]);
      if (!(f > 0.0f)) continue;
      any = true;
      if (!named) out += "\n  " + t.name + ":";
      named = true;
      out += "\n     rank " + python_format_int(static_cast<std::int64_t>(rank), 2) + ": " +
             python_format_fixed(static_cast<double>(f / scale), 2);
    }
  }
  if (!any) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::string> format_timers_block(std::span<const timer_reading> timers,
                                               timing_log_option option, double normalizer) {
  if (!(normalizer > 0.0))
    throw std::invalid_argument("timers: the normalizer (log interval) must be > 0");
  if (option == timing_log_option::all) return all_ranks_block(timers, normalizer);
  return min_max_block(timers, option == timing_log_option::max, normalizer);
}

std::span<const std::string_view> megatron_training_timer_names() {
  static constexpr std::string_view names[] = {
      "forward-backward",
      "forward-compute",
      "backward-compute",
      "batch-generator",
      "forward-recv",
      "forward-send",
      "backward-recv",
      "backward-send",
      "forward-send-forward-recv",
      "forward-send-backward-recv",
      "backward-send-forward-recv",
      "backward-send-backward-recv",
      "forward-backward-send-forward-backward-recv",
      "layernorm-grads-all-reduce",
      "embedding-grads-all-reduce",
      "all-grads-sync",
      "params-all-gather",
      "optimizer-copy-to-main-grad",
      "optimizer-unscale-and-check-inf",
      "optimizer-clip-main-grad",
      "optimizer-count-zeros",
      "optimizer-inner-step",
      "optimizer-copy-main-to-model-params",
      "optimizer",
  };
  return names;
}

}  // namespace mactor::training
