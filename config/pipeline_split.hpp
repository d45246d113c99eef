// Which transformer layers each (virtual) pipeline stage holds: Megatron's even split, its uneven
// first/last stages, the embedding/loss accounting, and the --pipeline-model-parallel-layout
// language ("Et*3|(tt|)*2L").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/megatron_args.hpp"
#include "config/pipeline_placement.hpp"

namespace mactor::config {

/// The flags that decide the split. `virtual_size` is the resolved virtual pipeline size (1
/// without interleaving).
struct pipeline_split_settings {
  int num_layers = 0;
  int pipeline_size = 1;
  int virtual_size = 1;
  std::optional<int> first_stage_layers;  ///< --decoder-first-pipeline-num-layers
  std::optional<int> last_stage_layers;   ///< --decoder-last-pipeline-num-layers
  bool account_for_embedding = false;     ///< --account-for-embedding-in-pipeline-split
  bool account_for_loss = false;          ///< --account-for-loss-in-pipeline-split
  std::optional<std::string> layout;      ///< --pipeline-model-parallel-layout
  int mtp_num_layers = 0;                 ///< --mtp-num-layers ('m' in a layout)
  /// Which rank and chunk run each stage (the V shape under --pipeline-schedule zbv).
  stage_placement placement = stage_placement::interleaved;

  static pipeline_split_settings of(const megatron_args& args);
};

/// What one virtual pipeline stage holds: global layers [layer_begin, layer_end), and whether it
/// runs the embedding (the first stage) and the loss (the last).
struct pipeline_stage_span {
  int layer_begin = 0;
  int layer_end = 0;
  bool embedding = false;
  bool loss = false;
  int layers() const { return layer_end - layer_begin; }
};

/// stages[pipeline_rank][local chunk]. Layers are numbered virtual stage by virtual stage, as
/// Megatron's get_transformer_layer_offset numbers them; the placement says which rank and chunk
/// run each virtual stage (interleaved: stage v is rank v % pp's chunk v / pp).
struct pipeline_split {
  std::vector<std::vector<pipeline_stage_span>> stages;
  const pipeline_stage_span& at(int pipeline_rank, int virtual_stage) const {
    return stages[std::size_t(pipeline_rank)][std::size_t(virtual_stage)];
  }
};

/// Megatron's layout string as stages of layer characters (E embedding, t transformer layer,
/// m MTP layer, L loss), in virtual-stage-major order: stage v * pp + r is rank r's chunk v.
/// Commas are cosmetic; "(...)*n" and "x*n" repeat. Throws std::invalid_argument naming the
/// flag and the bad character.
std::vector<std::string> parse_pipeline_layout(const std::string& layout);

/// The split the settings describe. Throws std::invalid_argument naming the flag and the fix when
/// they do not describe one (layers that do not divide, a layout that misplaces E or L, ...).
pipeline_split split_pipeline_layers(const pipeline_split_settings& settings);

/// Megatron's pretty_repr of a layout: one row per run of identical pipeline ranks, one column
/// per virtual stage ("embedding,decoder*2").
std::string describe_pipeline_split(const pipeline_split& split);

}  // namespace mactor::config
