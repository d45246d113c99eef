// Megatron's activation recomputation as model/ applies it: which activations a layer keeps
// between its forward and backward, and which it frees and recomputes when the backward comes.
//   full (--recompute-granularity full): a checkpointed group of layers keeps only its input; its
//     backward first reruns the group's forward. --recompute-method uniform splits a chunk's layers
//     into groups of --recompute-num-layers; block checkpoints only the chunk's first
//     --recompute-num-layers layers, one group each (Megatron's TransformerBlock._checkpointed_forward).
//     --distribute-saved-activations keeps 1/tp of each group input per tensor-parallel rank.
//   selective (--recompute-modules): core_attn drops the softmax probabilities and reruns the
//     attention core; layernorm drops the two norms' outputs; mlp drops fc1's output and its
//     activation. Each is rerun, in the backward, from what the layer kept.
// Recomputation replays the same kernels on the same inputs with the same dropout streams, so a
// recomputed run's losses equal the plain run's bit for bit.
#pragma once
#include <string>
#include <vector>

namespace mactor::model {

enum class recompute_granularity { none, full, selective };
enum class recompute_method { uniform, block };

struct recompute_config {
  recompute_granularity granularity = recompute_granularity::none;
  recompute_method method = recompute_method::uniform;  // full only
  int num_layers = 1;                     // full: group size (uniform) or layers to checkpoint (block)
  bool distribute_saved_activations = false;  // full: a group input split over the TP ranks
  bool core_attn = false;                 // selective modules
  bool layernorm = false;
  bool mlp = false;
  bool moe = false;  // the whole MoE layer (--moe-layer-recompute, or --recompute-modules moe)

  bool full() const { return granularity == recompute_granularity::full; }
  bool selective(bool module) const {
    return granularity == recompute_granularity::selective && module;
  }
};

/// Consecutive layers [begin, end) of a chunk; a checkpointed group keeps only its input.
struct layer_group {
  int begin = 0, end = 0;
  bool checkpointed = false;
};

/// A chunk of `layers` layers cut into groups as `config` says: every layer in exactly one group,
/// in order. Without full recomputation each layer is its own group, not checkpointed.
std::vector<layer_group> recompute_groups(const recompute_config& config, int layers);

/// Every rule `config` breaks, each naming the field and a fix; empty when usable.
std::vector<std::string> validate(const recompute_config& config, int tensor_model_parallel_size,
                                  bool sequence_parallel);

}  // namespace mactor::model
