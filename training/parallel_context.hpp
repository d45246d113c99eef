// The processes of one job as a rank's training code sees them: the rendezvous, the UCX data
// plane between every rank, Megatron's process groups and a communicator for each group the
// training step reduces over. A single process has no transport and only trivial groups.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/launch_env.hpp"
#include "comm/process_groups.hpp"
#include "comm/rendezvous_client.hpp"
#include "comm/transport.hpp"
#include "config/megatron_args.hpp"
#include "model/group.hpp"

namespace mactor::comm {
class watched_communicator;
}

namespace mactor::training {

class parallel_context {
 public:
  /// tp, pp and cp come from the args; dp = world / (tp * cp * pp). With world_size > 1, joins
  /// the job's rendezvous and connects every rank over UCX; throws comm::comm_error or
  /// comm::rendezvous_error naming the rank or the store that failed.
  parallel_context(const config::megatron_args& args, const comm::launch_env& env);
  ~parallel_context();
  parallel_context(const parallel_context&) = delete;
  parallel_context& operator=(const parallel_context&) = delete;

  const comm::process_groups& groups() const { return groups_; }
  int rank() const { return groups_.rank(); }
  int world_size() const { return groups_.world_size(); }
  int tp_rank() const { return groups_.coords().tp; }
  int dp_rank() const { return groups_.coords().dp; }
  int pp_rank() const { return groups_.coords().pp; }
  int cp_rank() const { return groups_.coords().cp; }
  /// This process's rank among those on its node (the launcher's).
  int local_rank() const { return local_rank_; }

  /// The data plane (null in a single process). Pipeline transfers use it directly.
  comm::transport* transport() { return transport_.get(); }
  /// The tensor-parallel group as the model takes it.
  model::group& tensor_parallel() { return *tp_group_; }
  /// The context-parallel group as the model takes it (attention's key/value all-gather), with
  /// its hierarchical levels (model::group::levels) when a2a+p2p attention uses them.
  model::group& context_parallel() { return *cp_group_; }
  /// Megatron's tp_cp group as the model takes it (the MoE routers' token counts): the
  /// tensor-parallel, context-parallel or their joint group; null when both are one rank.
  model::group* sequence_shards();
  /// The experts' tensor-parallel group as the model takes it, when its size is neither 1 nor
  /// the tensor-parallel size (null otherwise), and this rank's place in it.
  model::group* expert_tensor_parallel_group() { return etp_group_.get(); }
  /// Megatron's tp_dp_cp group as the model takes it, made for --moe-router-load-balancing-type
  /// global_aux_loss (null otherwise, or when this stage has one rank).
  model::group* global_batch_group() { return global_aux_loss_ ? tp_dp_cp_group_.get() : nullptr; }
  /// Megatron's get_amax_reduction_group(with_context_parallel=True) as the model takes it, made
  /// under fp8: the tp_dp_cp group, over which the delayed recipe's amaxes are max-reduced (null
  /// when this stage has one rank). Megatron's tp_only_amax_red (the tp_cp group instead) is a
  /// TransformerConfig field no pretrain_gpt flag sets, so it is always false here.
  model::group* amax_reduction_group() { return tp_dp_cp_group_.get(); }
  int expert_tp_rank() const { return expert_tp_rank_; }
  /// The expert-parallel group as the model takes it (the MoE token all-to-all).
  model::group& expert_parallel_group() { return *ep_group_; }
  /// This rank's place in its expert-parallel and expert-data-parallel groups (0 without MoE).
  int ep_rank() const { return ep_rank_; }
  int expert_dp_rank() const { return expert_dp_rank_; }
  /// Communicators; null when the group is this rank alone.
  /// The data-parallel group with the context-parallel ranks (Megatron's with_context_parallel
  /// group): gradients, losses and the distributed optimizer's shards reduce over it.
  comm::communicator* data_parallel() { return dp_.get(); }
  /// --num-distributed-optimizer-instances: the distributed optimizer shards over one instance's
  /// consecutive part of data_parallel() (Megatron's intra-partial group; data_parallel() itself
  /// with one instance, null when the part is one rank) and sums each shard over the instances
  /// (the inter-partial group, null with one instance).
  comm::communicator* optimizer_shard_group() { return instances_ ? intra_.get() : dp_.get(); }
  comm::communicator* optimizer_instances() { return instances_.get(); }
  /// Which instance holds this rank's optimizer shard (0 with one instance).
  int optimizer_instance() const { return optimizer_instance_; }
  /// With config::experts_have_own_groups: the expert-parallel group and the expert-data-parallel group
  /// (the ranks holding the same experts: their gradients and distributed-optimizer shards
  /// reduce over it); null otherwise (the experts then reduce with the dense parameters).
  comm::communicator* expert_parallel() { return ep_.get(); }
  comm::communicator* expert_data_parallel() { return expert_dp_.get(); }
  /// The experts' distributed-optimizer shards: one instance's consecutive part of
  /// expert_data_parallel() with several instances (Megatron's intra-partial expert group; null when
  /// the part is one rank), expert_data_parallel() itself with one. Their shards sum over
  /// optimizer_instances(), as the dense ones do.
  comm::communicator* expert_optimizer_shard_group() { return instances_ ? expert_intra_.get() : expert_dp_.get(); }
  comm::communicator* model_parallel() { return mp_.get(); }   ///< tp x pp: grad norms
  comm::communicator* embedding() { return embedding_.get(); } ///< first and last stage (tied embeddings)
  comm::communicator* world() { return world_.get(); }
  /// Every group's communicator, each able to say which collective it is in now.
  const std::vector<const comm::watched_communicator*>& watched() const { return watched_; }
  /// Global rank of pipeline stage `stage` in this rank's pipeline (same tp, cp, dp).
  int pipeline_rank_of(int stage) const;

  /// The job's key-value store (null in a single process).
  comm::rendezvous_client* store();

  /// Waits for every rank and closes the data plane (call once at a clean end of the job).
  void shutdown();

 private:
  /// A watched communicator over a group and named, or null for a group of one rank.
  using make_communicator = std::function<std::unique_ptr<comm::communicator>(const comm::group&, const char*)>;
  /// Megatron's hierarchical context-parallel groups, as cp_group_'s levels, for a2a+p2p attention.
  void make_cp_levels(const config::megatron_args& a, const make_communicator& make);

  struct impl;
  std::unique_ptr<impl> impl_;
  comm::process_groups groups_;
  int local_rank_ = 0;
  std::unique_ptr<comm::transport> transport_;
  std::unique_ptr<comm::communicator> dp_, ep_, expert_dp_, intra_, expert_intra_, instances_, mp_, embedding_, world_;
  std::unique_ptr<model::group> tp_group_, cp_group_, tp_cp_group_, ep_group_, etp_group_, tp_dp_cp_group_;
  std::vector<std::unique_ptr<model::group>> cp_levels_;  // --hierarchical-context-parallel-sizes
  bool global_aux_loss_ = false;
  int ep_rank_ = 0, expert_dp_rank_ = 0, expert_tp_rank_ = 0;
  int optimizer_instance_ = 0;
  std::vector<const comm::watched_communicator*> watched_;
};

/// A model::group over a communicator (the model's tensor-parallel collectives on the data plane).
std::unique_ptr<model::group> make_model_group(comm::communicator& c);

}  // namespace mactor::training
