// Formatting the simulation's results.
#include "simulate/simulation_report.hpp"

#include <algorithm>
#include <cstdio>

#include "schedules/schedule_shape.hpp"

namespace mactor::simulate {
namespace {

std::string format(const char* fmt, auto... values) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, fmt, values...);
  return buffer;
}

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

std::string headline(const simulation& s) {
  const auto& c = s.costs;
  std::string out = format("system: %s; world size %lld = tp %d x cp %d x pp %d x dp %d; %s schedule, vp %d, %d microbatches\n",
                           s.system.name.c_str(), static_cast<long long>(s.world_size), c.tensor, c.context, c.pipeline,
                           c.data, schedules::to_string(schedules::resolved_kind(s.shape)), c.virtual_stages,
                           s.shape.num_microbatches);
  double bubble = 0;
  for (const auto& r : s.iteration.ranks) bubble = std::max(bubble, r.bubble_fraction);
  out += format("iteration time (ms): %.1f | tokens/s: %.0f | model TFLOP/s/GPU: %.4g | MFU: %.1f%% | "
                "bubble: %.4f (ideal %.4f)\n",
                s.iteration.iteration_s * 1e3, s.tokens_per_second, s.model_tflops_per_gpu, 100 * s.mfu, bubble,
                s.ideal_bubble);
  out += format("model FLOPs per iteration (Megatron's formula, as --log-throughput counts them): %.4e\n",
                s.costs.model_flops_per_iteration);
  return out;
}

std::string exposed_communication(const simulation& s) {
  double tp = 0, cp = 0, ep = 0, pp = 0, dp = 0;
  for (const auto& r : s.iteration.ranks) {
    tp = std::max(tp, r.pipeline.exposed_tp_s);
    cp = std::max(cp, r.pipeline.exposed_cp_s);
    ep = std::max(ep, r.pipeline.exposed_ep_s);
    pp = std::max(pp, r.pipeline.exposed_pp_s);
    dp = std::max(dp, r.exposed_dp_s + r.pipeline.exposed_fsdp_s);
  }
  return format("exposed communication per iteration (ms, most exposed rank): TP %.1f | CP %.1f | EP %.1f | DP %.1f | PP %.1f\n",
                tp * 1e3, cp * 1e3, ep * 1e3, dp * 1e3, pp * 1e3);
}

std::string rank_table(const simulation& s) {
  std::string out =
      "rank | layers | busy ms | bubble | exposed TP/CP/PP/DP ms | params GiB | grads GiB | optim GiB | activ GiB | total GiB\n";
  for (std::size_t r = 0; r < s.iteration.ranks.size(); ++r) {
    const auto& it = s.iteration.ranks[r];
    const auto& m = s.memory[r];
    int layers = 0;
    for (const auto& c : s.costs.chunks[r]) layers += c.layers;
    const bool fits = m.total() <= s.system.memory_bytes;
    out += format("%4zu | %6d | %7.1f | %6.4f | %5.1f/%5.1f/%5.1f/%5.1f | %10.3g | %9.3g | %9.3g | %9.3g | %9.3g%s\n", r,
                  layers, it.pipeline.busy_s * 1e3, it.bubble_fraction, it.pipeline.exposed_tp_s * 1e3,
                  it.pipeline.exposed_cp_s * 1e3, it.pipeline.exposed_pp_s * 1e3, (it.exposed_dp_s + it.pipeline.exposed_fsdp_s) * 1e3,
                  m.parameters / GiB, m.gradients / GiB, m.optimizer / GiB, m.activations / GiB, m.total() / GiB,
                  fits ? "" : "  (over the accelerator's memory)");
  }
  return out;
}

}  // namespace

std::string report_text(const simulation& s) {
  std::string out = headline(s) + exposed_communication(s) + rank_table(s);
  out += "the lines above are one iteration at the full global batch (no data-dependent work is modelled); simplifications: ";
  std::string notes = "compute at the system's fixed efficiency";
  for (const auto& n : s.costs.notes) notes += "; " + n;
  return out + notes + "\n";
}

std::string run_text(const std::vector<run_phase>& phases) {
  std::string out = "per iteration:\n";
  double total = 0;
  for (const auto& p : phases) {
    out += format("iterations %lld-%lld | global batch size: %lld | microbatches: %lld | elapsed time per iteration (ms): %.1f | "
                  "throughput per GPU (TFLOP/s/GPU): %.4g | tokens/s: %.0f | MFU: %.1f%%\n",
                  static_cast<long long>(p.first), static_cast<long long>(p.last), static_cast<long long>(p.global_batch_size),
                  static_cast<long long>(p.num_microbatches), p.iteration_s * 1e3, p.model_tflops_per_gpu,
                  p.tokens_per_second, 100 * p.mfu);
    total += static_cast<double>(p.last - p.first + 1) * p.iteration_s;
  }
  const long long iterations = phases.empty() ? 0 : static_cast<long long>(phases.back().last);
  return out + format("training run: %lld iterations in %.3g hours (simulated)\n", iterations, total / 3600);
}

}  // namespace mactor::simulate
