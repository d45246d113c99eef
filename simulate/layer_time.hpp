// One layer's time in `mactor simulate`'s cost model, per microbatch on one rank: its compute at
// the system's rate, its element-wise kernels, its exposed tensor-, context- and expert-parallel
// communication and the waits for the slowest rank (rank_skew.hpp), and how a chunk adds them up
// (forward, backward with recompute, the weight-gradient share). Private to simulate/.
#pragma once

#include "config/megatron_args.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

// Per-microbatch sizes of one rank, in elements and bytes.
struct dims {
  double b, s, h, ffn, heads, groups, kv_channels;
  int tp, cp, dp, pp;
  bool sp;
  double act_bytes;  // bytes of one activation element (2 in bf16/fp16, 4 in fp32)
};

dims dims_of(const config::megatron_args& a);

/// Tensor-parallel collectives of one layer in one direction: two all-reduces, or with sequence
/// parallelism two all-gathers and two reduce-scatters, of the layer's full activation.
inline int tp_collectives_per_layer(const dims& d) { return d.sp ? 4 : 2; }
double tp_seconds_per_layer(const dims& d, const system_spec& system);

// One layer of a kind, per microbatch on one rank: compute, and the exposed tensor-parallel,
// context-parallel and expert-parallel communication of one direction (the backward's: the
// same collectives on the gradients, the ring twice).
struct layer_time {
  /// compute: the forward's kernels, the attention core's `core_attention` seconds among them;
  /// the backward runs twice the compute but the core, which takes core_attention_backward.
  double compute = 0, core_attention = 0, core_attention_backward = 0, tp = 0, cp_forward = 0, cp_backward = 0, ep = 0;
  double ep_backward = 0;  ///< the backward's exchange left exposed (--delay-wgrad-compute hides part)
  /// A context-parallel ring's attention core beyond what one rank's kernel takes on the same
  /// work (the system's ring_attention_efficiency), forward and backward.
  double ring_tiles_forward = 0, ring_tiles_backward = 0;
  /// The element-wise kernels where the system file prices them apart (elementwise_traffic.hpp),
  /// and the attention scores' share of them.
  double elementwise = 0, score_elementwise = 0;
  /// The forward's wait for the slowest rank of the groups the layer's collectives tie together
  /// (rank_skew.hpp; twice that in the backward), reported as the first of TP, CP, EP it has.
  double sync_wait = 0;
  enum class waits_in { tp, cp, ep } wait_group = waits_in::tp;
  /// The waits at each synchronization that do not scale with the compute (the system's
  /// sync_jitter), per group, forward and backward: as many as the layer's collectives and ring
  /// steps, the same count each way but the ring's.
  double tp_sync_forward = 0, tp_sync_backward = 0, cp_sync_forward = 0, cp_sync_backward = 0, ep_sync = 0;
  double fixed_waits_forward() const { return tp_sync_forward + cp_sync_forward + ep_sync; }
  double fixed_waits_backward() const { return tp_sync_backward + cp_sync_backward + ep_sync; }
  double forward() const {
    return compute + ring_tiles_forward + elementwise + tp + cp_forward + ep + sync_wait + fixed_waits_forward();
  }
};

// What kind of block a layer is, for its collectives: `tp_share` of a transformer layer's
// tensor-parallel collectives, whether it has an attention core (and so CP's ring exchange), and
// whether it is a Mamba mixer (CP's all-to-alls between positions and heads).
struct layer_shape {
  bool moe = false;
  double tp_share = 1;
  bool attention = true;
  bool mamba = false;
  bool mlp = true;
};

layer_time time_of_layer(const config::megatron_args& a, const system_spec& system, double forward_flops,
                         layer_shape shape, double rate);

/// The chunk's compute and exposed communication: `count` layers of each kind (decoder layers
/// first, MTP depths after; only decoder layers are recomputed, as with Megatron's full recompute).
void add_layers(chunk_cost& c, const layer_time& t, double count, double recomputed_share, bool selective);

}  // namespace mactor::simulate
