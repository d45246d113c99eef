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

std::vector<model::chunk_layout> chunk_layouts(int num_layers, int pipeline_size, int virtual_size, int pipeline_rank) {
  const int stages = pipeline_size * virtual_size;
  if (num_layers % stages != 0)
    throw std::invalid_argument("--num-layers " + std::to_string(num_layers) + " does not divide into " +
                                std::to_string(stages) + " (virtual) pipeline stages");
  const int per_stage = num_layers / stages;
  std::vector<model::chunk_layout> out;
  for (int c = 0; c < virtual_size; ++c) {
    const int v = c * pipeline_size + pipeline_rank;
    out.push_back({v * per_stage, (v + 1) * per_stage, v == 0, v == stages - 1});
  }
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
  return l;
}

}  // namespace mactor::training
