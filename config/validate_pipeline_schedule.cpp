// mactor's --pipeline-schedule against the layout: the schedule must fit the model chunks each
// rank holds, and the zero-bubble schedules' deferred weight gradients need gradient buffers that
// stay bound. ZB-V also places the stages in a V (rank 0 holds the embedding and the loss).
#include "config/validation_context.hpp"

namespace mactor::config::detail {
namespace {

void require_whole_gradient_buffers(validation_context& c, const std::string& name) {
  const auto& d = c.a.distributed;
  const bool sharded_grads = d.data_parallel_sharding_strategy == "optim_grads" ||
                             d.data_parallel_sharding_strategy == "optim_grads_params" || d.use_torch_fsdp2;
  c.require(!sharded_grads, "--pipeline-schedule " + name + " with sharded gradients (--data-parallel-sharding-strategy " +
                                d.data_parallel_sharding_strategy + (d.use_torch_fsdp2 ? ", --use-torch-fsdp2" : "") +
                                ") is not implemented by mactor yet (the deferred weight gradients need the whole "
                                "gradient buffer after the backward); use --pipeline-schedule 1f1b or "
                                "--data-parallel-sharding-strategy optim");
}

// DualPipeV trains at least 2 pp micro-batches per iteration (DeepSeek's assert), also at the
// start of a batch-size ramp.
void require_dual_pipe_v_microbatches(validation_context& c) {
  const auto& t = c.a.training;
  const auto pp = c.a.distributed.pipeline_model_parallel_size;
  const std::int64_t per_microbatch = t.micro_batch_size.value_or(1) * c.a.derived.data_parallel_size;
  const std::int64_t smallest = t.rampup_batch_size ? std::stoll(t.rampup_batch_size->front()) : t.global_batch_size.value_or(0);
  if (per_microbatch <= 0 || smallest <= 0) return;
  c.require(smallest / per_microbatch >= 2 * pp,
            "--pipeline-schedule dualpipev needs at least 2 x --pipeline-model-parallel-size = " + show(2 * pp) +
                " micro-batches per iteration (DeepSeek's DualPipeV), but " + show(smallest) + " samples over " +
                "--micro-batch-size x data-parallel size = " + show(per_microbatch) + " give " +
                show(smallest / per_microbatch) + "; raise --global-batch-size or use --pipeline-schedule zbv");
}

// ZB-V and DualPipeV: two chunks per rank in a V, so the embedding (stage 0) and the loss (stage
// 2 pp - 1) are both on pipeline rank 0; what mactor builds of that shape so far.
void validate_v_schedule(validation_context& c, const std::string& name) {
  const auto& d = c.a.distributed;
  const auto vp = c.a.derived.virtual_pipeline_model_parallel_size.value_or(1);
  c.require(d.pipeline_model_parallel_size >= 2,
            "--pipeline-schedule " + name + " needs --pipeline-model-parallel-size of 2 or more, got " +
                show(d.pipeline_model_parallel_size) + "; use the default schedule without pipelining");
  c.require(vp == 2, "--pipeline-schedule " + name + " runs two model chunks per rank in a V (rank r holds virtual stages r and "
                     "2 pp - 1 - r), but the virtual pipeline size is " + show(vp) +
                     "; add --num-virtual-stages-per-pipeline-rank 2 (or --num-layers-per-virtual-pipeline-stage "
                     "num_layers / (2 pp))");
  // A tied embedding's two copies are chunks 0 and 1 of rank 0, summed there after the backward.
  // Multi-token prediction reads the embedding on the last stage too: the same local sum.
  const bool shared_embedding =
      !c.a.network_size.untie_embeddings_and_output_weights || c.a.network_size.mtp_num_layers.value_or(0) > 0;
  c.require(!shared_embedding || !d.overlap_grad_reduce || c.a.derived.data_parallel_size == 1,
            "--pipeline-schedule " + name + " with a shared embedding (tied, or read by --mtp-num-layers) and "
            "--overlap-grad-reduce is not implemented by mactor yet (the last stage's copy of the embedding would be "
            "reduced before the embedding's gradient is complete); drop --overlap-grad-reduce");
  // A layout names each virtual stage; the V places them. The per-rank flags have no V meaning.
  c.require(!d.decoder_first_pipeline_num_layers && !d.decoder_last_pipeline_num_layers &&
                !d.account_for_embedding_in_pipeline_split && !d.account_for_loss_in_pipeline_split,
            "--pipeline-schedule " + name + " places stages r and 2 pp - 1 - r on rank r, so the per-rank uneven flags "
            "(--decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-split) do not say "
            "which stage they mean; give the split per virtual stage with --pipeline-model-parallel-layout instead");
  require_whole_gradient_buffers(c, name);
  if (name == "dualpipev") require_dual_pipe_v_microbatches(c);
}

}  // namespace

void validate_pipeline_schedule(validation_context& c) {
  const auto& name = c.a.mactor.pipeline_schedule;
  if (name.empty()) return;
  c.require(!c.a.moe.overlap_moe_expert_parallel_comm || name == "megatron" || name == "no-pipelining" ||
                name == "interleaved-1f1b",
            "--overlap-moe-expert-parallel-comm runs Megatron's combined 1F1B schedule (without pipelining or "
            "interleaved), so it cannot run under --pipeline-schedule " + name + "; drop one of the two");
  const auto& vp = c.a.derived.virtual_pipeline_model_parallel_size;
  if (name == "interleaved-1f1b") {
    c.require(vp.has_value(), "--pipeline-schedule interleaved-1f1b needs model chunks to interleave; add "
                              "--virtual-pipeline-model-parallel-size (or --num-layers-per-virtual-pipeline-stage) "
                              "of 2 or more, or pick --pipeline-schedule 1f1b");
    return;
  }
  if (name == "zbv" || name == "dualpipev") return validate_v_schedule(c, name);
  c.require(!vp.has_value(), "--pipeline-schedule " + name + " runs one model chunk per rank, but "
                             "--virtual-pipeline-model-parallel-size=" + show(vp.value_or(1)) +
                             "; drop the virtual pipeline or use --pipeline-schedule interleaved-1f1b");
  if (name == "zb-h1") require_whole_gradient_buffers(c, name);
}

}  // namespace mactor::config::detail
