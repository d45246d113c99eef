// bench_all_to_all's MoE rows: one expert-parallel rank's token dispatch and combine, timed
// around an identity "expert", as the MoE layer runs them (moe_token_dispatcher's permutation and
// moe_expert_exchange's all-to-alls of the rows and their probabilities).
#pragma once

#include <cstdint>
#include <functional>

#include "model/group.hpp"
#include "tensor/tensor.hpp"

namespace mactor::bench {

struct moe_dispatch_shape {
  int tokens = 4096;  // this rank's tokens (a micro-batch: seq * batch)
  int hidden = 1024;
  int experts = 8;
  int topk = 2;
  tensor::dtype type = tensor::dtype::bfloat16;  // the activations'; the probabilities too
};

// Medians of the timed iterations, each step on its own: the dispatch is the permutation into
// expert order (moe_token_dispatcher::plan + dispatch) and then the exchange (the counts'
// all-gather, the rows' and probabilities' all-to-alls, the sort by local expert); the combine is
// the exchange back and the unpermutation that sums each token's rows.
struct moe_dispatch_times {
  double permute_ms = 0, dispatch_exchange_ms = 0, combine_exchange_ms = 0, unpermute_ms = 0;
  double sent_mib = 0;  // rows this rank sends to other ranks in one dispatch
};

/// Routes shape.tokens random tokens (each to topk distinct experts drawn uniformly, seeded by the
/// rank) over the expert-parallel group `ep`, then times `iters` dispatches and combines.
/// `barrier` runs before each exchange so every rank starts it together.
moe_dispatch_times time_moe_dispatch(model::group& ep, const moe_dispatch_shape& shape, int iters,
                                     const std::function<void()>& barrier);

}  // namespace mactor::bench
