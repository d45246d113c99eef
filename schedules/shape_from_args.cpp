// The schedule shape of a resolved command line (schedules/shape_from_args.hpp).
#include "schedules/shape_from_args.hpp"

namespace mactor::schedules {

schedule_shape shape_from_args(const config::megatron_args& a) {
  schedule_shape s;
  s.pipeline_model_parallel_size = static_cast<int>(a.distributed.pipeline_model_parallel_size);
  s.virtual_pipeline_model_parallel_size = static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  s.num_microbatches = static_cast<int>(a.derived.num_microbatches);
  if (a.distributed.microbatch_group_size_per_vp_stage)
    s.microbatch_group_size_per_vp_stage = static_cast<int>(*a.distributed.microbatch_group_size_per_vp_stage);
  s.overlap_p2p_comm = a.distributed.overlap_p2p_comm;
  s.overlap_p2p_comm_warmup_flush = a.distributed.overlap_p2p_comm_warmup_flush;
  s.combined_1f1b = a.moe.overlap_moe_expert_parallel_comm;
  s.kind = schedule_kind_named(a.mactor.pipeline_schedule).value_or(schedule_kind::megatron);
  return s;
}

}  // namespace mactor::schedules
