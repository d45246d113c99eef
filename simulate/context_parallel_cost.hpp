// The attention's context-parallel exchanges in `mactor simulate`, one layer and micro-batch on
// one rank, as mactor's runtime does them for each --cp-comm-type (model/context_parallel.hpp):
//   p2p: cp - 1 ring steps of the local keys and values, overlapped with the attention core:
//        only what the core cannot hide is exposed; the backward passes blocks and their
//        gradients (twice the forward's exposure);
//   a2a: Ulysses: the qkv all-to-all from sequence to head sharding and the context's back, the
//        same two on the gradients in the backward, none hidden;
//   allgather: all-gather the keys and values; the backward reduce-scatters their gradients;
//   a2a+p2p: a2a over --hierarchical-context-parallel-sizes' first level (consecutive
//        context-parallel ranks), then p2p over the second on those ranks' positions.
// Multi-latent attention always all-gathers (as mactor's MLA does). A per-layer --cp-comm-type
// list is priced as the mean over the layers.
#pragma once

#include "config/megatron_args.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// Exposed seconds of one attention layer's context-parallel exchanges, each direction.
struct cp_exchange_time {
  double forward = 0, backward = 0;
};

/// How many times one attention layer's context-parallel exchanges synchronize the group, each
/// direction (a ring step, an all-to-all, an all-gather or reduce-scatter each once): p2p cp - 1
/// forward and cp backward (the ring's steps as mactor runs them), a2a 2 and 2, allgather 1 and 1,
/// a2a+p2p the sum of its levels'; a per-layer list averaged, MLA as allgather.
struct cp_synchronizations {
  double forward = 0, backward = 0;
};
cp_synchronizations cp_attention_synchronizations(const config::megatron_args& a);

/// How much longer one attention layer's core takes on this rank than one rank's kernel would on
/// the same work, as a share of that (1 / the system's ring_attention_efficiency - 1), forward
/// and backward: p2p's ring runs tiles of seq / (2 cp) positions, a2a+p2p's of seq / (2 p) (p:
/// the ring's size); a2a and allgather run the one-rank kernel (0); a per-layer list averaged.
struct cp_core_overhead {
  double forward = 0, backward = 0;
};
cp_core_overhead cp_attention_core_overhead(const config::megatron_args& a, const system_spec& system);

/// `core_attention_s`: the forward attention core's seconds on this rank (what a ring hides behind).
cp_exchange_time cp_attention_exchange(const config::megatron_args& a, const system_spec& system, double core_attention_s);

}  // namespace mactor::simulate
