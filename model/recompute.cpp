// Cutting a chunk's layers into recomputation groups.
#include "model/recompute.hpp"

#include <algorithm>
#include <string>

namespace mactor::model {

std::vector<layer_group> recompute_groups(const recompute_config& c, int layers) {
  std::vector<layer_group> groups;
  if (!c.full()) {
    for (int i = 0; i < layers; ++i) groups.push_back({i, i + 1, false});
    return groups;
  }
  if (c.method == recompute_method::uniform) {
    for (int i = 0; i < layers; i += c.num_layers)
      groups.push_back({i, std::min(i + c.num_layers, layers), true});
    return groups;
  }
  for (int i = 0; i < layers; ++i) groups.push_back({i, i + 1, i < c.num_layers});
  return groups;
}

std::vector<std::string> validate(const recompute_config& c, int tp, bool sequence_parallel) {
  std::vector<std::string> errors;
  if (c.full() && c.num_layers < 1)
    errors.push_back("recompute num_layers is " + std::to_string(c.num_layers) +
                     "; full recomputation needs at least 1 (--recompute-num-layers 1)");
  if (c.distribute_saved_activations) {
    if (!c.full())
      errors.push_back("distribute_saved_activations needs full recomputation "
                       "(--recompute-granularity full)");
    if (tp < 2)
      errors.push_back("distribute_saved_activations needs tensor_model_parallel_size > 1");
    if (sequence_parallel)
      errors.push_back("distribute_saved_activations cannot be combined with sequence_parallel");
  }
  return errors;
}

}  // namespace mactor::model
