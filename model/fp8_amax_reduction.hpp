// The delayed recipe's amax step of one fp8_autocast region, as Transformer Engine runs it under
// Megatron (FP8GlobalStateManager.reduce_and_update_fp8_tensors): at the end of the region's
// forward the newest recorded amax of every fp8 linear's input and weight, and after its backward
// that of every grad_output, go into one buffer, all-reduced with MAX over the amax reduction
// group (Megatron's get_amax_reduction_group: the tensor-, data- and context-parallel ranks of one
// pipeline stage); the maxima are written back and every scale is updated from them. In mactor a
// region is one model chunk's forward (or backward) of one micro-batch. With a group of one rank
// the scales are those each linear's own update gives.
#pragma once
#include <vector>

#include "model/fp8_linear.hpp"
#include "model/group.hpp"

namespace mactor::model {

class fp8_amax_reduction {
 public:
  /// The region's linears (those of the delayed recipe take part; the others scale from the
  /// tensor being quantized and have nothing to reduce). Defers their updates to this step.
  explicit fp8_amax_reduction(const std::vector<fp8_linear*>& linears);
  /// The amax reduction group; null (the default) reduces over this rank alone. Every rank of
  /// the group must run the same steps in the same order.
  void set_group(group* g) { group_ = g; }
  group* amax_group() const { return group_; }

  /// The step after the region's forward (input and weight amaxes) or backward (grad_output).
  void after(fp8_linear::pass p);

 private:
  std::vector<fp8_linear*> linears_;  // the delayed recipe's, in the region's order
  group* group_ = nullptr;
  std::vector<float> buffer_;
};

}  // namespace mactor::model
