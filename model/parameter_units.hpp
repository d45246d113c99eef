// Fully sharded data parallelism's units (Megatron FSDP's per-module buckets): a chunk's
// parameters in groups it uses one at a time, so ZeRO-3 can gather each group's whole values just
// before they are used and free them after. Unit 0 holds the embedding (and the last stage's copy
// of the word table), unit 1 + i the chunk's local layer i (its experts too), and the last unit
// the final norm, the output layer and the multi-token-prediction depths.
#pragma once

#include <string>

namespace mactor::model {

/// The unit of the parameter `name` in a chunk whose first layer is global layer `layer_begin`
/// and which holds `num_layers` layers.
inline int parameter_unit(const std::string& name, int layer_begin, int num_layers) {
  const std::string layers = "decoder.layers.";
  if (name.rfind(layers, 0) == 0) return 1 + std::stoi(name.substr(layers.size())) - layer_begin;
  if (name.rfind("embedding.", 0) == 0) return 0;
  return num_layers + 1;
}

/// What a chunk tells about its units as it computes: `use` before it reads a unit's values
/// (forward or backward, a recomputation included), `done` when it needs them no longer for
/// now. The owner may gather and free them, and prefetch the next unit in that direction. A
/// backward's `use` also means the unit's gradients are written until its `done`; `grads_needed`
/// tells of gradients written outside a backward's use (the loss's forward makes the output
/// layer's, the embedding's backward reads no values). The owner may then hold, reduce and free
/// each unit's gradients on its own.
class parameter_units {
 public:
  virtual ~parameter_units() = default;
  virtual void use(int unit, bool forward) = 0;
  virtual void done(int unit, bool forward) = 0;
  virtual void grads_needed(int /*unit*/) {}
};

}  // namespace mactor::model
