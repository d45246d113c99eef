// Where a rank's stage sits and what it runs: the layers of its model chunks, its pipeline and
// data-parallel positions, with sizes taken from the config message.
#pragma once

#include <stdexcept>
#include <vector>

#include "config/megatron_args.hpp"
#include "config/pipeline_split.hpp"
#include "model/gpt_chunk.hpp"
#include "training/parallel_context.hpp"

namespace mactor::training {

/// The layers of every local chunk of pipeline rank `pipeline_rank`, as the split places them
/// (chunk c runs virtual stage c * pipeline_size + pipeline_rank, or the V shape's stage).
std::vector<model::chunk_layout> chunk_layouts(const config::pipeline_split& split, int pipeline_rank);

/// A rank started with another parallel layout than rank 0's: a user error (exit status 2).
class layout_mismatch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Where this rank's stage sits and what it runs: sizes from the config message, positions from
/// the process groups. Throws layout_mismatch when the two disagree (a rank started with other
/// flags than rank 0's).
struct stage_layout {
  int pipeline_size = 1, pipeline_rank = 0, virtual_size = 1;
  int data_parallel_size = 1, data_parallel_rank = 0;
  int micro_batch_size = 1;
  /// Which rank and chunk run each virtual stage (the V shape under --pipeline-schedule zbv).
  config::stage_placement placement = config::stage_placement::interleaved;
  std::vector<model::chunk_layout> chunks;  ///< this rank's model chunks, one per virtual stage
};
stage_layout stage_layout_of(const config::megatron_args& args, const parallel_context& ctx);

}  // namespace mactor::training
