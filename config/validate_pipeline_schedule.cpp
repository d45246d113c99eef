// mactor's --pipeline-schedule against the layout: the schedule must fit the model chunks each
// rank holds, and ZB-H1's deferred weight gradients need gradient buffers that stay bound.
#include "config/validation_context.hpp"

namespace mactor::config::detail {

void validate_pipeline_schedule(validation_context& c) {
  const auto& name = c.a.mactor.pipeline_schedule;
  if (name.empty()) return;
  const auto& vp = c.a.derived.virtual_pipeline_model_parallel_size;
  if (name == "interleaved-1f1b") {
    c.require(vp.has_value(), "--pipeline-schedule interleaved-1f1b needs model chunks to interleave; add "
                              "--virtual-pipeline-model-parallel-size (or --num-layers-per-virtual-pipeline-stage) "
                              "of 2 or more, or pick --pipeline-schedule 1f1b");
    return;
  }
  c.require(!vp.has_value(), "--pipeline-schedule " + name + " runs one model chunk per rank, but "
                             "--virtual-pipeline-model-parallel-size=" + show(vp.value_or(1)) +
                             "; drop the virtual pipeline or use --pipeline-schedule interleaved-1f1b");
  if (name != "zb-h1") return;
  const auto& d = c.a.distributed;
  const bool sharded_grads = d.data_parallel_sharding_strategy == "optim_grads" ||
                             d.data_parallel_sharding_strategy == "optim_grads_params" || d.use_torch_fsdp2;
  c.require(!sharded_grads, "--pipeline-schedule zb-h1 with sharded gradients (--data-parallel-sharding-strategy " +
                                d.data_parallel_sharding_strategy + (d.use_torch_fsdp2 ? ", --use-torch-fsdp2" : "") +
                                ") is not implemented by mactor yet (the deferred weight gradients need the whole "
                                "gradient buffer after the backward); use --pipeline-schedule 1f1b or "
                                "--data-parallel-sharding-strategy optim");
}

}  // namespace mactor::config::detail
