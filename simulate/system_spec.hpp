// What `mactor simulate --system FILE` knows about a machine: one accelerator's peak rates and the
// share of them real kernels reach, and the links between accelerators inside a node and across
// nodes, each as latency + bytes / bandwidth (the alpha-beta model).
#pragma once

#include <string>
#include <vector>

namespace mactor::simulate {

/// One link class, per accelerator and per direction.
struct link_spec {
  double latency_s = 0;         ///< alpha: fixed cost of one message (or one ring step)
  double bandwidth_Bps = 0;     ///< beta^-1: bytes per second one accelerator can push
};

/// Ring attention's compute on chunks of `chunk_tokens` positions (a context-parallel rank's
/// tiles: each query chunk against each key chunk), relative to one rank's attention kernel on
/// the same work, forward and backward: below 1 where the ring's small tiles cost more per FLOP
/// (on CPUs, the BLAS packs every small GEMM's operands), above 1 where they cost less.
struct ring_tile_point {
  double chunk_tokens = 0, forward = 1, backward = 1;
};

/// A machine: accelerators grouped in nodes; every accelerator alike.
struct system_spec {
  std::string name;
  double peak_flops_bf16 = 0;   ///< dense matmul peak, FLOP/s (also used for fp16)
  double peak_flops_fp32 = 0;   ///< used when neither --bf16 nor --fp16 is given
  /// Share of the peak a transformer layer's kernels reach on average (matmuls and attention, and
  /// the element-wise work around them unless memory_efficiency prices it apart). Model FLOPs /
  /// (peak x efficiency) = compute time.
  double compute_efficiency = 1;
  /// Share of the peak the attention core reaches (one rank's kernel on the whole sequence:
  /// scores, softmax, dropout, context), forward and backward (the file's attention_efficiency
  /// {forward, backward}); 0: compute_efficiency, the core then one of the layer's kernels.
  double attention_efficiency_forward = 0, attention_efficiency_backward = 0;
  double memory_bytes = 0;              ///< accelerator memory, for the "fits" column
  double memory_bandwidth_Bps = 0;      ///< HBM, for the optimizer step (a memory-bound pass)
  /// Share of memory_bandwidth_Bps the element-wise kernels reach (elementwise_traffic.hpp). 0:
  /// not priced apart, compute_efficiency then stands for the element-wise work too.
  double memory_efficiency = 0;
  int accelerators_per_node = 1;
  link_spec intra_node;                 ///< NVLink / shared memory
  link_spec inter_node;                 ///< InfiniBand / RoCE, per accelerator (its own NIC)
  /// Share of a link's bandwidth a collective's ring reaches (NCCL's bus bandwidth / link rate).
  double collective_efficiency = 1;
  /// Coefficient of variation of a rank's compute time between two synchronizations (0: ranks
  /// in lockstep); each synchronizing collective waits for the slowest member (rank_skew.hpp).
  double compute_jitter = 0;
  /// Standard deviation of a rank's arrival at each synchronization that does not scale with the
  /// compute since the last one (interrupts, the scheduler, the waiting thread's wake-up), in
  /// seconds (the file's sync_jitter_us); each synchronizing collective or ring step waits
  /// E[max of its members] x this (rank_skew.hpp). 0: none.
  double sync_jitter_s = 0;
  /// Ring attention's relative efficiency by chunk size (the file's ring_attention_efficiency,
  /// sorted by chunk_tokens): interpolated in log chunk size, the nearest point outside them;
  /// empty: as one rank's kernel.
  std::vector<ring_tile_point> ring_attention_efficiency;
};

/// `system`'s ring attention efficiency at chunks of `chunk_tokens` positions ({chunk, 1, 1}
/// without the field).
ring_tile_point ring_attention_efficiency_at(const system_spec& system, double chunk_tokens);

/// Reads a system file (JSON, see simulate/systems/*.json and README.md). Throws
/// std::invalid_argument naming the file and the missing or bad field.
system_spec read_system_file(const std::string& path);

/// Parses the JSON text of a system file; `where` names it in errors.
system_spec parse_system_json(const std::string& text, const std::string& where);

/// An ideal machine for tests: `flops` FLOP/s at efficiency 1, free links (zero latency, infinite
/// bandwidth), unbounded memory, `per_node` accelerators per node.
system_spec ideal_system(double flops, int per_node = 8);

}  // namespace mactor::simulate
