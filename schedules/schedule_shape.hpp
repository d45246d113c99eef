// The shape of one rank's pipeline schedule (sizes, rank, microbatches, which schedule), the
// checks Megatron-Core makes on it, and the numbers derived from it (warmup, ideal bubble).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/pipeline_placement.hpp"

namespace mactor::schedules {

/// Which schedule runs. `megatron` picks what Megatron-Core's get_forward_backward_func picks:
/// pp == 1 gives no_pipelining, pp > 1 gives one_f_one_b, or interleaved_one_f_one_b when vp > 1.
enum class schedule_kind {
  megatron,
  no_pipelining,           ///< forward_backward_no_pipelining: F0 B0 F1 B1 ... (gradient accumulation)
  one_f_one_b,             ///< forward_backward_pipelining_without_interleaving
  interleaved_one_f_one_b, ///< forward_backward_pipelining_with_interleaving
  gpipe,                   ///< all forwards, then all backwards (not in Megatron; an extra)
  zero_bubble_h1,          ///< ZB-H1: 1F1B with deferred weight-gradient passes (not in Megatron)
  zero_bubble_v,           ///< ZB-V: two chunks per rank in a V, split backward (not in Megatron)
  dual_pipe_v,             ///< DualPipeV: the V with DualPipe's paired order (not in Megatron)
};

/// Everything a schedule needs to know about one pipeline rank. Plain data; field names are
/// Megatron's argparse dests where a flag exists.
struct schedule_shape {
  int pipeline_model_parallel_size = 1;          ///< pp
  int pipeline_rank = 0;                         ///< this rank's position in the pipeline, [0, pp)
  int virtual_pipeline_model_parallel_size = 1;  ///< vp: model chunks per rank (1 = Megatron's None)
  int num_microbatches = 1;                      ///< m, per data-parallel replica and iteration
  /// g: microbatches run back to back on one chunk before moving to the next (interleaving only).
  /// 0 means Megatron's default, pp.
  int microbatch_group_size_per_vp_stage = 0;
  /// Interleaving only: overlap p2p with compute (Megatron's default; --no-overlap-p2p-communication
  /// turns it off). It changes where transfers are posted, never the compute order.
  bool overlap_p2p_comm = true;
  /// Interleaving with overlap only (--overlap-p2p-communication-warmup-flush): in the warmup every
  /// rank but the first posts the receive of forward k + 1 before forward k, and in the flush
  /// every rank but the last posts the receive of backward k + 1 before backward k.
  bool overlap_p2p_comm_warmup_flush = false;
  bool forward_only = false;  ///< evaluation: forwards only, no backward, no gradient transfers
  /// Megatron's combined 1F1B schedule (--overlap-moe-expert-parallel-comm; training only, no
  /// pipelining or interleaving): each steady-state step is one micro-batch's forward paired with
  /// an earlier one's backward, so that one's expert all-to-alls can hide behind the other's
  /// compute. No pipelining runs F0, F1 B0, F2 B1, ..., B(m-1); interleaving runs one more warmup
  /// forward (so the pair never depends on itself) and, with p2p overlap, posts both directions'
  /// transfers after the pair. In these orders a forward directly followed by a backward is a
  /// pair, and every pair is.
  bool combined_1f1b = false;
  schedule_kind kind = schedule_kind::megatron;
};

/// The schedule that actually runs: `kind`, or Megatron's choice when kind is `megatron`.
schedule_kind resolved_kind(const schedule_shape& s);

/// Name used on the command line and in reports: "no-pipelining", "1f1b", "interleaved-1f1b",
/// "gpipe", "zb-h1", "zbv", "dualpipev" (and "megatron" for the automatic choice).
const char* to_string(schedule_kind kind);
/// The kind `to_string` names; the empty name is Megatron's choice, as "megatron". nullopt for
/// any other name.
std::optional<schedule_kind> schedule_kind_named(std::string_view name);

/// g with Megatron's default applied (pp when unset).
int microbatch_group_size(const schedule_shape& s);

/// Every rule the shape breaks, one message each, naming the flags, the values and a fix.
/// Empty when the schedule can run. Mirrors Megatron-Core's checks (validation.md rules 25, 121,
/// 125-127): g in [pp, m] (Megatron raises ValueError), m % g == 0 or >= pp (RuntimeError),
/// interleaving needs pp > 1, or pp > 2 without p2p overlap (assert in validate_args).
std::vector<std::string> validate(const schedule_shape& s);

/// Forward passes this rank runs before its first backward (Megatron's num_warmup_microbatches,
/// counted in forward passes of one chunk): 1F1B and ZB-H1 min(pp - rank - 1, m); interleaved
/// min(2 (pp - rank - 1) + (vp - 1) g, vp m), one more inside the min under combined_1f1b;
/// ZB-V min(2 pp - rank - 1, m) + min(rank + 1, m); DualPipeV the forwards of its order before
/// its first backward (2 pp, or 2 pp + 1 on the last rank, fewer with m < 2 pp); no pipelining
/// 0, or under combined_1f1b 1 (F0 alone before the first pair; 0 when m = 1); GPipe m;
/// forward_only: all of them.
int warmup_microbatches(const schedule_shape& s);

/// Fraction of the iteration each rank sits idle in the ideal model: every chunk's forward takes
/// the same time t_f / vp, every backward t_b / vp, transfers are free (derivation in README.md).
/// 1F1B and GPipe: (pp - 1) / (m + pp - 1); interleaved: (pp - 1) / (vp m + pp - 1);
/// no pipelining: 0. Independent of t_b / t_f and of forward_only. ZB-H1 (training): the
/// paper's setting t_f = t_b = t_w, zero_bubble_h1_bubble_fraction(pp, m, 1, 1, 1); ZB-V
/// (training): zero_bubble_v_bubble_fraction(pp, m); DualPipeV (training):
/// dual_pipe_v_bubble_fraction(pp, m); forward_only: 1F1B's.
double ideal_bubble_fraction(const schedule_shape& s);

/// ZB-H1's idle fraction on every rank when each forward takes t_f, each input-gradient backward
/// t_b and each weight-gradient pass t_w <= t_f, m >= pp: (pp - 1)(t_f + t_b - t_w) over
/// m (t_f + t_b + t_w) + (pp - 1)(t_f + t_b - t_w) (Qi et al., section 3.1).
double zero_bubble_h1_bubble_fraction(int pp, int m, double t_f, double t_b, double t_w);

/// Whether this rank holds the first (or last) pipeline stage.
inline bool is_first_rank(const schedule_shape& s) { return s.pipeline_rank == 0; }
inline bool is_last_rank(const schedule_shape& s) {
  return s.pipeline_rank == s.pipeline_model_parallel_size - 1;
}

/// Whether the schedule splits each backward into an input-gradient pass and a deferred
/// weight-gradient pass (op::backward_weight): ZB-H1, ZB-V and DualPipeV.
inline bool splits_backward(const schedule_shape& s) {
  return s.kind == schedule_kind::zero_bubble_h1 || s.kind == schedule_kind::zero_bubble_v ||
         s.kind == schedule_kind::dual_pipe_v;
}

/// Where the schedule places the virtual stages: the V shape for ZB-V and DualPipeV, else
/// Megatron's round-robin (config/pipeline_placement.hpp).
inline config::stage_placement placement(const schedule_shape& s) {
  return config::placement_for_schedule(to_string(s.kind));
}

/// The virtual pipeline stage a local chunk runs: chunk * pp + rank (Megatron's layer order), or
/// under ZB-V rank for chunk 0 and 2 pp - 1 - rank for chunk 1.
inline int virtual_stage(const schedule_shape& s, int chunk) {
  return config::virtual_stage_of(placement(s), s.pipeline_model_parallel_size, s.pipeline_rank, chunk);
}

/// ZB-V's idle fraction on every rank when each chunk's forward, input-gradient and
/// weight-gradient pass take the same time t (the paper's setting), transfers free:
/// max(pp - 1, 4 pp - 2 m - 2) t idle over 6 m t busy. From m >= 2 pp - 1 on that is the start-up
/// alone, (pp - 1) t: half of ZB-H1's (pp - 1)(t_f + t_b - t_w) with twice as long passes, at the
/// same activation memory as 1F1B.
double zero_bubble_v_bubble_fraction(int pp, int m);
/// Its idle time in units of one pass: max(pp - 1, 4 pp - 2 m - 2).
int zero_bubble_v_idle_passes(int pp, int m);

/// DualPipeV's idle fraction in the same setting, m >= 2 pp (DeepSeek's minimum) and no overlap of
/// a paired forward and backward (a CPU run has none): the start-up alone, (pp - 1) t, ZB-V's.
double dual_pipe_v_bubble_fraction(int pp, int m);

}  // namespace mactor::schedules
