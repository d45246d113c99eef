// --main-params-dtype fp16 (with --use-precision-aware-optimizer): Transformer Engine's FusedAdam
// keeps the master weights as fp16 with one scale per optimizer tensor (absmax / (65504 / 2)).
// Its step loads and unscales them, updates in fp32, writes the model weights from those fp32
// values, and stores the result rounded to scaled fp16 again; the next step starts from the
// unscaled fp16 values. Here the optimizer updates the fp32 main-parameter buffer as for fp32,
// and after the model has taken its weights each tensor's fp32 values are stored as scaled fp16
// and replaced by what loading them back gives (the fp32 buffer is the working copy).
#pragma once

#include <span>
#include <vector>

#include "model/optimizer_param.hpp"
#include "model/optimizer_state.hpp"

namespace mactor::training {

class fp16_main_params {
 public:
  /// Stores each parameter's main values as scaled fp16 and loads them back into the values.
  void store(std::span<const model::optim_param> params);
  /// Bytes of the fp16 master weights.
  std::size_t bytes() const;

 private:
  std::vector<model::scaled_state> masters_;  // one per optimizer parameter
};

}  // namespace mactor::training
