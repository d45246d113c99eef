// Weight-gradient work a backward leaves for later: zero-bubble schedules split a layer's backward
// into the input gradient (on the critical path) and the weight gradient, which a later W pass
// runs (Megatron's EP-overlap and the ZB repository call the same thing a WeightGradStore).
// A layer hands over its weight-gradient GEMMs as work on named inputs; while the store collects,
// it copies those inputs (the layer's saved activations and the output gradient are overwritten
// by the next micro-batch) and queues the work under the micro-batch; otherwise the work runs at
// once on the inputs as they are, so a backward that is not split costs nothing extra.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::model {

class deferred_weight_grads {
 public:
  using work = std::function<void(std::span<const tensor::const_tensor_view> inputs)>;

  /// From now on, add() queues its work under `microbatch` instead of running it. Without
  /// `copy_inputs` the queue keeps views of the inputs: for a caller that runs the work before
  /// anything overwrites them (a layer deferring its weight gradients past its own all-to-all).
  void begin_collecting(int microbatch, bool copy_inputs = true);
  /// add() runs its work at once again.
  void stop_collecting() { collecting_ = false; }
  bool collecting() const { return collecting_; }

  /// Runs `w(inputs)` now, or, while collecting, copies the inputs (an empty view stays empty)
  /// and queues the work.
  /// The work must capture only what outlives the backward (the layer, the store, sizes).
  void add(std::initializer_list<tensor::const_tensor_view> inputs, work w);
  /// Runs the queued work of `microbatch` in the order it was added and frees its copies.
  /// Queues of several micro-batches run in the order they are asked for; a micro-batch with no
  /// queued work is a no-op.
  void run(int microbatch);
  /// Queued work items and the bytes of their input copies.
  std::size_t pending() const { return queue_.size(); }
  std::int64_t pending_bytes() const { return pending_bytes_; }

 private:
  struct item {
    int microbatch;
    std::vector<tensor::tensor> inputs;           // copies
    std::vector<tensor::const_tensor_view> views;  // or the inputs themselves
    work w;
  };
  bool collecting_ = false, copy_inputs_ = true;
  int microbatch_ = 0;
  std::deque<item> queue_;
  std::int64_t pending_bytes_ = 0;
};

}  // namespace mactor::model
