// Megatron-Core's schedule selection and checks, and the warmup / bubble numbers of each schedule.
#include "schedules/schedule_shape.hpp"

#include <algorithm>

#include "schedules/dual_pipe_v.hpp"
#include "schedules/zero_bubble_v.hpp"

namespace mactor::schedules {
namespace {

std::string num(int v) { return std::to_string(v); }

// The V orders' warmup, counted from the order itself (chunk forwards).
int forwards_before_first_backward(const std::vector<action>& compute) {
  int forwards = 0;
  for (const action& a : compute) {
    if (a.kind == op::backward) break;
    forwards += a.kind == op::forward;
  }
  return forwards;
}

// Group sizes Megatron would accept for this pp and m, for the "try ..." part of an error.
std::string valid_group_sizes(int pp, int m) {
  std::string out;
  int shown = 0;
  for (int g = pp; g <= m && shown < 8; ++g) {
    if (m % g != 0 && m % g < pp) continue;
    out += (out.empty() ? "" : ", ") + num(g);
    ++shown;
  }
  return out;
}

void check_sizes(const schedule_shape& s, std::vector<std::string>& errors) {
  const int pp = s.pipeline_model_parallel_size;
  if (pp < 1)
    errors.push_back("--pipeline-model-parallel-size=" + num(pp) + " must be at least 1");
  if (s.virtual_pipeline_model_parallel_size < 1)
    errors.push_back("--virtual-pipeline-model-parallel-size=" +
                     num(s.virtual_pipeline_model_parallel_size) +
                     " must be at least 1 (1 means no interleaving)");
  if (s.num_microbatches < 1)
    errors.push_back("number of microbatches=" + num(s.num_microbatches) +
                     " must be at least 1; raise --global-batch-size or lower "
                     "--micro-batch-size / the data-parallel size");
  if (pp >= 1 && (s.pipeline_rank < 0 || s.pipeline_rank >= pp))
    errors.push_back("pipeline rank " + num(s.pipeline_rank) + " is outside [0, " + num(pp - 1) +
                     "] for --pipeline-model-parallel-size=" + num(pp));
  if (s.microbatch_group_size_per_vp_stage < 0)
    errors.push_back("--microbatch-group-size-per-virtual-pipeline-stage=" +
                     num(s.microbatch_group_size_per_vp_stage) + " must be positive");
}

void check_kind(const schedule_shape& s, std::vector<std::string>& errors) {
  const int pp = s.pipeline_model_parallel_size;
  const int vp = s.virtual_pipeline_model_parallel_size;
  switch (s.kind) {
    case schedule_kind::no_pipelining:
      if (pp != 1 || vp != 1)
        errors.push_back("the no-pipelining schedule runs the whole model on one rank, but "
                         "--pipeline-model-parallel-size=" + num(pp) + " and vp=" + num(vp) +
                         "; set both to 1 or pick another schedule");
      break;
    case schedule_kind::one_f_one_b:
    case schedule_kind::gpipe:
    case schedule_kind::zero_bubble_h1:
      if (vp != 1)
        errors.push_back(std::string("the ") + to_string(s.kind) +
                         " schedule runs one model chunk per rank, but "
                         "--virtual-pipeline-model-parallel-size=" + num(vp) +
                         "; drop it or use the interleaved-1f1b schedule");
      break;
    case schedule_kind::interleaved_one_f_one_b:
      if (vp < 2)
        errors.push_back("the interleaved-1f1b schedule needs "
                         "--virtual-pipeline-model-parallel-size of 2 or more, got " + num(vp));
      break;
    case schedule_kind::zero_bubble_v:
    case schedule_kind::dual_pipe_v:
      if (vp != 2 || pp < 2)
        errors.push_back(std::string("the ") + to_string(s.kind) +
                         " schedule runs two model chunks per rank in a V on 2 or more pipeline ranks, but "
                         "--pipeline-model-parallel-size=" + num(pp) + " and vp=" + num(vp) +
                         "; set --num-virtual-stages-per-pipeline-rank 2 and pp >= 2");
      if (s.kind == schedule_kind::dual_pipe_v && !s.forward_only && s.num_microbatches < 2 * pp)
        errors.push_back("the dualpipev schedule needs at least 2 x --pipeline-model-parallel-size = " + num(2 * pp) +
                         " micro-batches per iteration, got " + num(s.num_microbatches) +
                         " (as DeepSeek's DualPipeV); raise --global-batch-size or use --pipeline-schedule zbv");
      break;
    case schedule_kind::megatron: break;
  }
  const schedule_kind resolved = resolved_kind(s);
  if (s.combined_1f1b && resolved != schedule_kind::no_pipelining && resolved != schedule_kind::interleaved_one_f_one_b)
    errors.push_back(std::string("--overlap-moe-expert-parallel-comm runs Megatron's combined 1F1B schedule, which "
                                 "exists without pipelining or interleaved, but this schedule is ") +
                     to_string(resolved) + "; add virtual pipeline stages or drop the flag");
}

// Megatron: initialize_model_parallel (RuntimeError) and validate_args (assert), rules 25 and 121.
void check_interleaving_sizes(const schedule_shape& s, std::vector<std::string>& errors) {
  const int pp = s.pipeline_model_parallel_size;
  const int vp = s.virtual_pipeline_model_parallel_size;
  if (vp < 2) return;
  if (s.overlap_p2p_comm && pp < 2)
    errors.push_back("--virtual-pipeline-model-parallel-size=" + num(vp) +
                     " needs --pipeline-model-parallel-size greater than 1, got " + num(pp) +
                     " (Megatron: 'When interleaved schedule is used, pipeline-model-parallel "
                     "size should be greater than 1'); raise pp or drop virtual stages");
  if (s.overlap_p2p_comm_warmup_flush && !s.overlap_p2p_comm)
    errors.push_back("--overlap-p2p-communication-warmup-flush needs the overlapped p2p communication; "
                     "drop --no-overlap-p2p-communication");
  if (!s.overlap_p2p_comm && pp < 3)
    errors.push_back("--virtual-pipeline-model-parallel-size=" + num(vp) +
                     " with --no-overlap-p2p-communication needs --pipeline-model-parallel-size "
                     "greater than 2, got " + num(pp) +
                     " (otherwise one communication batch has several sends and receives between "
                     "the same two ranks); drop --no-overlap-p2p-communication or raise pp");
}

// Megatron: forward_backward_pipelining_with_interleaving, rule 127.
void check_group(const schedule_shape& s, std::vector<std::string>& errors) {
  const int pp = s.pipeline_model_parallel_size;
  const int m = s.num_microbatches;
  const int g = microbatch_group_size(s);
  if (g > m || g < pp) {
    std::string fix = pp <= m ? "use a group size in [" + num(pp) + ", " + num(m) + "]"
                              : "raise the number of microbatches to at least " + num(pp) +
                                    " (--global-batch-size) or lower pp";
    errors.push_back("--microbatch-group-size-per-virtual-pipeline-stage=" + num(g) +
                     " must lie in [--pipeline-model-parallel-size=" + num(pp) +
                     ", number of microbatches=" + num(m) +
                     "] (Megatron raises ValueError: the number of contiguous micro-batches in a "
                     "virtual pipeline stage should range in [PP=" + num(pp) + " , M=" + num(m) +
                     "]); " + fix);
    return;
  }
  const int last_group = m % g;
  if (last_group > 0 && last_group < pp)
    errors.push_back("number of microbatches=" + num(m) +
                     " % --microbatch-group-size-per-virtual-pipeline-stage=" + num(g) + " = " +
                     num(last_group) + " is neither 0 nor >= --pipeline-model-parallel-size=" +
                     num(pp) + " (Megatron raises RuntimeError: the last microbatch group would "
                     "leave dependency bubbles in the pipeline); try a group size of " +
                     valid_group_sizes(pp, m) + ", or a number of microbatches divisible by " +
                     num(g));
}

}  // namespace

schedule_kind resolved_kind(const schedule_shape& s) {
  if (s.kind != schedule_kind::megatron) return s.kind;
  if (s.pipeline_model_parallel_size <= 1) return schedule_kind::no_pipelining;
  return s.virtual_pipeline_model_parallel_size > 1 ? schedule_kind::interleaved_one_f_one_b
                                                    : schedule_kind::one_f_one_b;
}

const char* to_string(schedule_kind kind) {
  switch (kind) {
    case schedule_kind::megatron: return "megatron";
    case schedule_kind::no_pipelining: return "no-pipelining";
    case schedule_kind::one_f_one_b: return "1f1b";
    case schedule_kind::interleaved_one_f_one_b: return "interleaved-1f1b";
    case schedule_kind::gpipe: return "gpipe";
    case schedule_kind::zero_bubble_h1: return "zb-h1";
    case schedule_kind::zero_bubble_v: return "zbv";
    case schedule_kind::dual_pipe_v: return "dualpipev";
  }
  return "?";
}

std::optional<schedule_kind> schedule_kind_named(std::string_view name) {
  if (name.empty()) return schedule_kind::megatron;
  for (auto kind : {schedule_kind::megatron, schedule_kind::no_pipelining, schedule_kind::one_f_one_b,
                    schedule_kind::interleaved_one_f_one_b, schedule_kind::gpipe, schedule_kind::zero_bubble_h1,
                    schedule_kind::zero_bubble_v, schedule_kind::dual_pipe_v})
    if (name == to_string(kind)) return kind;
  return std::nullopt;
}

int microbatch_group_size(const schedule_shape& s) {
  return s.microbatch_group_size_per_vp_stage > 0 ? s.microbatch_group_size_per_vp_stage
                                                  : s.pipeline_model_parallel_size;
}

std::vector<std::string> validate(const schedule_shape& s) {
  std::vector<std::string> errors;
  check_sizes(s, errors);
  if (!errors.empty()) return errors;
  check_kind(s, errors);
  check_interleaving_sizes(s, errors);
  if (errors.empty() && resolved_kind(s) == schedule_kind::interleaved_one_f_one_b)
    check_group(s, errors);
  return errors;
}

int warmup_microbatches(const schedule_shape& s) {
  const int pp = s.pipeline_model_parallel_size;
  const int m = s.num_microbatches;
  const int vp = s.virtual_pipeline_model_parallel_size;
  switch (resolved_kind(s)) {
    case schedule_kind::no_pipelining: return s.forward_only ? m : s.combined_1f1b ? std::min(1, m - 1) : 0;
    case schedule_kind::gpipe: return m;
    case schedule_kind::one_f_one_b:
    case schedule_kind::zero_bubble_h1:
      return s.forward_only ? m : std::min(pp - s.pipeline_rank - 1, m);
    case schedule_kind::interleaved_one_f_one_b:
      // Every rank first fills (vp - 1) groups so chunk vp-1 has work; earlier ranks run two more
      // forwards per rank behind them, one for each direction the pipeline has to travel.
      if (s.forward_only) return vp * m;
      // The combined 1F1B schedule runs one more, so each pair's forward and backward are independent.
      return std::min(2 * (pp - s.pipeline_rank - 1) + (vp - 1) * microbatch_group_size(s) + int(s.combined_1f1b),
                      vp * m);
    case schedule_kind::zero_bubble_v:
      return s.forward_only ? 2 * m : forwards_before_first_backward(zero_bubble_v_compute(s));
    case schedule_kind::dual_pipe_v:
      return s.forward_only ? 2 * m : forwards_before_first_backward(dual_pipe_v_compute(s));
    case schedule_kind::megatron: break;
  }
  return 0;
}

double ideal_bubble_fraction(const schedule_shape& s) {
  const double pp = s.pipeline_model_parallel_size;
  const double m = s.num_microbatches;
  const double vp = s.virtual_pipeline_model_parallel_size;
  switch (resolved_kind(s)) {
    case schedule_kind::no_pipelining: return 0.0;
    case schedule_kind::one_f_one_b:
    case schedule_kind::gpipe: return (pp - 1) / (m + pp - 1);
    case schedule_kind::interleaved_one_f_one_b: return (pp - 1) / (vp * m + pp - 1);
    case schedule_kind::zero_bubble_h1:
      return s.forward_only ? (pp - 1) / (m + pp - 1)
                            : zero_bubble_h1_bubble_fraction(int(pp), int(m), 1.0, 1.0, 1.0);
    case schedule_kind::zero_bubble_v:
      return s.forward_only ? (pp - 1) / (m + pp - 1) : zero_bubble_v_bubble_fraction(int(pp), int(m));
    case schedule_kind::dual_pipe_v:
      return s.forward_only ? (pp - 1) / (m + pp - 1) : dual_pipe_v_bubble_fraction(int(pp), int(m));
    case schedule_kind::megatron: break;
  }
  return 0.0;
}

double zero_bubble_h1_bubble_fraction(int pp, int m, double t_f, double t_b, double t_w) {
  const double idle = (pp - 1) * (t_f + t_b - t_w);
  return idle / (m * (t_f + t_b + t_w) + idle);
}

double zero_bubble_v_bubble_fraction(int pp, int m) {
  // Busy: 6 m passes of one unit. Idle: from m >= 2 pp - 1 on, only the start-up (rank pp - 1's
  // first input comes after pp - 1 forwards), the least any schedule has; with fewer micro-batches
  // the iteration is one micro-batch's critical path (2 pp forwards, 2 pp input-gradient passes,
  // rank 0's two weight passes) plus 4 units per further micro-batch.
  const double idle = zero_bubble_v_idle_passes(pp, m);
  return idle / (6.0 * m + idle);
}

int zero_bubble_v_idle_passes(int pp, int m) { return std::max(pp - 1, 4 * pp - 2 * m - 2); }

double dual_pipe_v_bubble_fraction(int pp, int m) {
  const double idle = pp - 1;  // the start-up alone, as ZB-V's (m >= 2 pp)
  return idle / (6.0 * m + idle);
}

}  // namespace mactor::schedules
