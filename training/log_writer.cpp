// Megatron's training_log and evaluate_and_print_results output, from merged reports.
#include "training/energy_meter.hpp"
#include "training/log_writer.hpp"
#include "training/moe_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "config/config_json.hpp"
#include "training/flops.hpp"
#include "training/step_timers.hpp"

namespace mactor::training {

log_writer::log_writer(const config::megatron_args& a, std::FILE* out, int world_size, std::int64_t padded)
    : args_(a), out_(out), world_size_(world_size), padded_vocab_(padded) {
  if (a.training.tensorboard_dir) tb_ = std::make_unique<tensorboard_writer>(*a.training.tensorboard_dir);
}

log_writer::~log_writer() { flush(); }

void log_writer::start_wandb() {
  if (!args_.logging.wandb_project.empty()) state_.wandb = std::make_shared<wandb_writer>(args_);
}

void log_writer::wandb_log(const std::string& key, double value, std::int64_t step) {
  if (state_.wandb) state_.wandb->log(key, value, step);
}

void log_writer::scalar(const std::string& tag, double value, std::int64_t step) {
  if (tb_) tb_->add_scalar(tag, value, step);
  wandb_log(tag, value, step);
}

void log_writer::flush() {
  if (tb_) tb_->flush();
  if (out_) std::fflush(out_);
}

void log_writer::print(const std::string& line) {
  if (!out_) return;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void log_writer::print_datetime(const std::string& what, record_time at) {
  print("[" + what + "] datetime: " + log_timestamp(at.wall) + " ");
}

void log_writer::write_args() {
  if (!tb_) return;
  for (const auto& [name, value] : config::argument_strings(args_)) tb_->add_text(name, value, 0);
}

void log_writer::add_timings(const iteration_report& r) {
  auto& sums = state_.timer_seconds;
  for (const auto& t : r.timings) {
    if (t.rank < 0) continue;
    const auto rank = static_cast<std::size_t>(t.rank);
    if (sums.size() <= rank) sums.resize(std::max(rank + 1, static_cast<std::size_t>(world_size_)));
    auto& row = sums[rank];
    if (row.size() < t.seconds.size()) row.resize(t.seconds.size(), 0.0);
    for (std::size_t i = 0; i < t.seconds.size(); ++i) row[i] += t.seconds[i];
  }
}

// The timers mactor keeps, in the order of training_log's timers_to_log, each with every rank's sum.
std::vector<timer_reading> log_writer::timer_readings() const {
  const auto& sums = state_.timer_seconds;
  std::vector<timer_reading> out;
  for (const std::string_view name : megatron_training_timer_names()) {
    for (std::size_t t = 0; t < num_step_timers; ++t) {
      if (step_timer_name(static_cast<step_timer>(t)) != name) continue;
      timer_reading reading{std::string(name), std::vector<double>(sums.size(), 0.0)};
      for (std::size_t rank = 0; rank < sums.size(); ++rank)
        if (t < sums[rank].size()) reading.seconds_by_rank[rank] = sums[rank][t];
      out.push_back(std::move(reading));
    }
  }
  return out;
}

namespace {

timing_log_option timing_option(const config::megatron_args& a) {
  const auto option = parse_timing_log_option(a.logging.timing_log_option);
  if (!option) throw std::invalid_argument("--timing-log-option " + a.logging.timing_log_option + " is not one of max, minmax, all");
  return *option;
}

}  // namespace

std::optional<std::string> log_writer::timers_block() const {
  return format_timers_block(timer_readings(), timing_option(args_), static_cast<double>(args_.training.log_interval));
}

void log_writer::timers(const std::vector<std::string>& names, const std::vector<rank_timings>& timings) {
  std::vector<timer_reading> readings;
  for (std::size_t i = 0; i < names.size(); ++i) {
    timer_reading reading{names[i], std::vector<double>(static_cast<std::size_t>(world_size_), 0.0)};
    for (const auto& t : timings) {
      if (t.rank < 0 || i >= t.seconds.size()) continue;
      const auto rank = static_cast<std::size_t>(t.rank);
      if (reading.seconds_by_rank.size() <= rank) reading.seconds_by_rank.resize(rank + 1, 0.0);
      reading.seconds_by_rank[rank] += t.seconds[i];
    }
    readings.push_back(std::move(reading));
  }
  if (const auto block = format_timers_block(readings, timing_option(args_), 1.0)) print(*block);
}

// Megatron's timers.write (with --log-timers-to-tensorboard: the max over ranks, in seconds per
// iteration, as "<name>-time") and then timers.log; both cover the interval, which starts anew.
void log_writer::log_timers(std::int64_t iteration) {
  if (state_.timer_seconds.empty()) return;
  if (args_.logging.log_timers_to_tensorboard) {  // timers.write to the TensorBoard and the W&B writers
    for (const auto& reading : timer_readings()) {
      float max = 0.0f;  // Megatron gathers the times into an fp32 tensor
      for (double seconds : reading.seconds_by_rank) max = std::max(max, static_cast<float>(seconds));
      if (max <= 0.0f) continue;
      const double per_iteration = static_cast<double>(max) / static_cast<double>(args_.training.log_interval);
      scalar(reading.name + "-time", per_iteration, iteration);
    }
  }
  if (const auto block = timers_block()) print(*block);
  state_.timer_seconds.clear();
}

namespace {

std::optional<double> present(bool has, double value) { return has ? std::optional(value) : std::nullopt; }

std::int64_t batch_of(const iteration_report& r, const config::megatron_args& a) {
  return r.global_batch_size > 0 ? r.global_batch_size : *a.training.global_batch_size;
}

}  // namespace

void log_writer::iteration(const iteration_report& r, std::int64_t consumed, record_time at, std::int64_t skipped) {
  const auto& a = args_;
  add_timings(r);
  const double lm_loss = r.num_tokens > 0 ? r.loss_sum / r.num_tokens : 0.0;
  state_.energy_joules += r.energy_joules;
  if (a.logging.log_energy && r.energy_missing && !state_.energy_warned) {
    print("WARNING: --log-energy: a host has no readable RAPL package counter (" + energy_meter::default_root() +
          "/intel-rapl:N/energy_uj; the kernel's powercap driver, and read access to it, are needed); energy and "
          "power are not logged");
    state_.energy_warned = true;
  }
  // Megatron's total_loss_dict: the lm loss, then track_moe_metrics' entries.
  std::vector<std::pair<std::string, float>> losses{{"lm loss", static_cast<float>(lm_loss)}};
  const auto moe = moe_metrics(a, r.moe_losses);
  for (const auto& m : moe) losses.emplace_back(m.name, m.value);
  state_.accumulator.add_iteration(losses, !r.update_successful);
  // Then track_mtp_metrics' "mtp_<k> loss" entries (added even to a skipped iteration's sums, as
  // Megatron's), written every iteration (to W&B with or without TensorBoard).
  for (std::size_t k = 0; k < r.mtp_losses.size(); ++k) {
    const std::string name = "mtp_" + std::to_string(k + 1) + " loss";
    state_.accumulator.add_tracked(name, static_cast<float>(r.mtp_losses[k]));
    scalar(name, r.mtp_losses[k], r.iteration);
  }
  if (tb_)  // track_moe_metrics writes every iteration, whatever --tensorboard-log-interval
    for (const auto& m : moe) {
      scalar(m.name, m.value, r.iteration);
      if (a.moe.moe_per_layer_logging)
        for (std::size_t i = 0; i < m.per_layer.size(); ++i)
          scalar("moe/" + m.name + "_layer_" + std::to_string(i), m.per_layer[i], r.iteration);
    }
  if (tb_ && r.iteration % a.logging.tensorboard_log_interval == 0) interval_scalars(r, consumed, skipped, lm_loss);
  if (r.iteration % a.training.log_interval == 0) interval_line(r, consumed, skipped, at);
}

// training_log's TensorBoard block (every --tensorboard-log-interval); each tag but the
// "vs samples" ones and the decoupled learning rate goes to W&B too, as Megatron's calls send it.
void log_writer::interval_scalars(const iteration_report& r, std::int64_t consumed, std::int64_t skipped, double lm_loss) {
  const auto& a = args_;
  auto both = [&](const std::string& tag, double v) {
    scalar(tag, v, r.iteration);
    tb_->add_scalar(tag + " vs samples", v, consumed);
  };
  wandb_log("samples vs steps", static_cast<double>(consumed), r.iteration);
  both("learning-rate", r.learning_rate);
  if (r.has_decoupled_learning_rate) tb_->add_scalar("decoupled-learning-rate", r.decoupled_learning_rate, r.iteration);
  if (skipped > 0) scalar("skipped-train-samples", static_cast<double>(skipped), r.iteration);
  both("batch-size", static_cast<double>(batch_of(r, a)));
  both("lm loss", lm_loss);
  if (a.logging.log_loss_scale_to_tensorboard) both("loss-scale", r.loss_scale);
  if (a.logging.log_world_size_to_tensorboard) both("world-size", static_cast<double>(world_size_));
  if (r.has_grad_norm) both("grad-norm", r.grad_norm);
  if (r.has_num_zeros) both("num-zeros", r.num_zeros);
  if (r.has_params_norm) both("params-norm", r.params_norm);
  if (a.logging.log_memory_to_tensorboard && !r.memory.empty()) {
    // Megatron writes the writer rank's allocator statistics; here rank 0's ledger and RSS.
    const auto& m = *std::min_element(r.memory.begin(), r.memory.end(),
                                      [](const rank_memory& x, const rank_memory& y) { return x.rank < y.rank; });
    tb_->add_scalar("mem-reserved-bytes", m.reserved_bytes, r.iteration);
    tb_->add_scalar("mem-allocated-bytes", m.allocated_bytes, r.iteration);
    tb_->add_scalar("mem-max-allocated-bytes", m.max_allocated_bytes, r.iteration);
  }
}

// The training line every --log-interval, then what Megatron writes with it: energy, the first
// memory report, iteration time and throughput, the timers; the interval starts anew.
void log_writer::interval_line(const iteration_report& r, std::int64_t consumed, std::int64_t skipped, record_time at) {
  const auto& a = args_;
  const auto now = at.steady;
  const std::int64_t gbs = batch_of(r, a);
  training_log_inputs in;
  in.timestamp = log_timestamp(at.wall);
  in.iteration = r.iteration;
  in.train_iters = *a.training.train_iters;
  in.consumed_train_samples = consumed;
  in.skipped_train_samples = skipped;
  in.interval_seconds = std::chrono::duration<double>(now - state_.interval_start).count();
  in.learning_rate = r.learning_rate;
  in.decoupled_learning_rate = present(r.has_decoupled_learning_rate, r.decoupled_learning_rate);
  in.global_batch_size = gbs;
  in.world_size = world_size_;
  if (a.logging.log_throughput) in.flops_per_iteration = num_floating_point_operations(a, padded_vocab_, gbs);
  in.grad_norm = present(r.has_grad_norm, r.grad_norm);
  in.num_zeros_in_grad = present(r.has_num_zeros, r.num_zeros);
  in.params_norm = present(r.has_params_norm, r.params_norm);
  in.loss_scale = r.loss_scale;
  if (a.logging.log_energy && !r.energy_missing) in.energy_joules = state_.energy_joules;
  const training_log_line line = make_training_log_line(in, state_.accumulator);
  print(format_training_log_line(line));
  state_.accumulator.reset();
  state_.energy_joules = 0;
  if (line.energy_per_gpu && line.power_per_gpu) {  // the logged values, as Megatron writes them
    scalar("iter-energy/gpu", *line.energy_per_gpu, r.iteration);
    scalar("power/gpu", *line.power_per_gpu, r.iteration);
  }
  if (!state_.memory_reported && !r.memory.empty()) {
    // Megatron's report_memory after the first log line, from each data-parallel-rank-0 rank.
    auto ranks = r.memory;
    std::sort(ranks.begin(), ranks.end(), [](const rank_memory& x, const rank_memory& y) { return x.rank < y.rank; });
    for (const auto& m : ranks)
      if (m.data_parallel_first) print(memory_line(m, r.iteration));
    state_.memory_reported = true;
  }
  if (a.logging.log_timers_to_tensorboard) {
    const double per_iteration = in.interval_seconds / static_cast<double>(a.training.log_interval);
    scalar("iteration-time", per_iteration, r.iteration);
    if (in.flops_per_iteration)
      scalar("throughput", *in.flops_per_iteration / (per_iteration * 1e12 * world_size_), r.iteration);
  }
  log_timers(r.iteration);
  if (tb_) tb_->flush();
  state_.interval_start = now;
}

void log_writer::validation(const std::string& prefix, double loss, std::int64_t iteration, std::int64_t consumed,
                            std::optional<int> set_index) {
  if (tb_) {
    const std::string tag = "lm loss validation" + (set_index ? "-" + std::to_string(*set_index) : std::string());
    tb_->add_scalar(tag, loss, iteration);
    tb_->add_scalar(tag + " vs samples", loss, consumed);
    if (args_.logging.log_validation_ppl_to_tensorboard) {
      const double ppl = std::exp(std::min(20.0, loss));
      tb_->add_scalar(tag + " ppl", ppl, iteration);
      tb_->add_scalar(tag + " ppl vs samples", ppl, consumed);
    }
    wandb_log(tag, loss, iteration);
    tb_->flush();
  }
  const std::pair<std::string, float> v{"lm loss", static_cast<float>(loss)};
  print(format_validation_block(prefix, std::span(&v, 1), set_index));
}

}  // namespace mactor::training
