// Where a rank's stage sits: its layers, its pipeline and data-parallel positions.
#include "training/stage_layout.hpp"

#include <stdexcept>
#include <string>

namespace mactor::training {
namespace {

std::string mismatch(const char* what, std::int64_t in_config, int in_groups) {
  return std::string(what) + " is " + std::to_string(in_config) + " in rank 0's flags but " +
         std::to_string(in_groups) + " in this rank's process groups";
}

}  // namespace

std::vector<model::chunk_layout> chunk_layouts(const config::pipeline_split& split, int pipeline_rank) {
  std::vector<model::chunk_layout> out;
  for (const auto& span : split.stages.at(std::size_t(pipeline_rank)))
    out.push_back({span.layer_begin, span.layer_end, span.embedding, span.loss});
  return out;
}

stage_layout stage_layout_of(const config::megatron_args& a, const parallel_context& ctx) {
  const auto& groups = ctx.groups();
  const auto pp = a.distributed.pipeline_model_parallel_size, dp = a.derived.data_parallel_size;
  std::string errors;
  if (pp != groups.pp()) errors += "\n  " + mismatch("--pipeline-model-parallel-size", pp, groups.pp());
  if (dp != groups.dp()) errors += "\n  " + mismatch("the data-parallel size", dp, groups.dp());
  if (a.distributed.tensor_model_parallel_size != groups.tp())
    errors += "\n  " + mismatch("--tensor-model-parallel-size", a.distributed.tensor_model_parallel_size, groups.tp());
  if (!errors.empty())
    throw layout_mismatch("rank " + std::to_string(ctx.rank()) + " was started with another parallel layout than rank 0:" +
                          errors + "\n  give every rank the same flags");
  stage_layout l;
  l.pipeline_size = static_cast<int>(pp);
  l.pipeline_rank = ctx.pp_rank();
  l.virtual_size = static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  l.data_parallel_size = static_cast<int>(dp);
  l.data_parallel_rank = ctx.dp_rank();
  l.micro_batch_size = static_cast<int>(*a.training.micro_batch_size);
  const auto settings = config::pipeline_split_settings::of(a);
  l.placement = settings.placement;
  l.chunks = chunk_layouts(config::split_pipeline_layers(settings), l.pipeline_rank);
  return l;
}

}  // namespace mactor::training
