// Wires the rendezvous store, the UCX transport and the ring collectives for one rank's groups.
#include "training/parallel_context.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "comm/collectives.hpp"
#include "config/moe_layout.hpp"
#include "config/pipeline_placement.hpp"
#include "comm/watched_communicator.hpp"
#include "comm/rendezvous.hpp"
#include "comm/store_address_exchange.hpp"
#include "comm/ucx_transport.hpp"

namespace mactor::training {
namespace {

comm::process_groups make_groups(const config::megatron_args& a, const comm::launch_env& env) {
  comm::parallel_sizes s;
  s.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  s.pp = static_cast<int>(a.distributed.pipeline_model_parallel_size);
  s.cp = static_cast<int>(a.distributed.context_parallel_size);
  s.tp_pp_dp_mapping = a.distributed.use_tp_pp_dp_mapping;
  // A dense model has no expert groups (validation refuses --expert-model-parallel-size without
  // --num-experts); MoE: Megatron's expert generator.
  if (a.moe.num_experts) {
    s.ep = static_cast<int>(a.moe.expert_model_parallel_size);
    s.etp = static_cast<int>(a.moe.expert_tensor_parallel_size.value_or(0));
  }
  return comm::process_groups(env.world_size, env.rank, s);
}

class communicator_group final : public model::group {
 public:
  explicit communicator_group(comm::communicator& c) : c_(c) {}
  int size() const override { return c_.size(); }
  int rank() const override { return c_.rank(); }
  void all_reduce_sum(float* d, std::size_t n) override { c_.all_reduce(std::span<float>(d, n)); }
  void all_reduce_sum(double* d, std::size_t n) override { c_.all_reduce(std::span<double>(d, n)); }
  void all_gather(const float* in, float* out, std::size_t n) override { gather(in, out, n); }
  void all_gather(const double* in, double* out, std::size_t n) override { gather(in, out, n); }
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override {
    c_.reduce_scatter(std::span<const float>(in, n * size()), std::span<float>(out, n));
  }
  void reduce_scatter_sum(const double* in, double* out, std::size_t n) override {
    c_.reduce_scatter(std::span<const double>(in, n * size()), std::span<double>(out, n));
  }
  void all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                          std::span<const std::size_t> recv_bytes) override {
    std::size_t sent = 0, received = 0;
    for (auto b : send_bytes) sent += b;
    for (auto b : recv_bytes) received += b;
    c_.all_to_all_v_bytes(std::span<const std::byte>(in, sent), send_bytes, std::span<std::byte>(out, received),
                          recv_bytes);
  }
  void labelled(const std::string& what, int peer, const std::function<void()>& exchange) override {
    const comm::call_label label(what, peer);  // read by a watched communicator
    exchange();
  }
  /// The communicator's exchange, driven by the caller's test() calls (no thread of its own).
  std::unique_ptr<model::pending_shift> start_ring_shift(const std::byte* send, std::byte* recv, std::size_t n,
                                                         int step, std::string what) override {
    const int to = ((rank() + step) % size() + size()) % size(), from = ((rank() - step) % size() + size()) % size();
    return std::make_unique<exchange_shift>(
        c_.start_exchange(std::span<const std::byte>(send, n), to, std::span<std::byte>(recv, n), from),
        std::move(what), from);
  }

 private:
  // A pending exchange as the model sees it; its wait is labelled for the watched communicator.
  class exchange_shift final : public model::pending_shift {
   public:
    exchange_shift(std::unique_ptr<comm::pending_exchange> inner, std::string what, int from)
        : inner_(std::move(inner)), what_(std::move(what)), from_(from) {}
    bool test() override { return inner_->test(); }
    void wait() override {
      const comm::call_label label(what_, from_);
      inner_->wait();
    }

   private:
    std::unique_ptr<comm::pending_exchange> inner_;
    std::string what_;
    int from_;
  };

  template <class T>
  void gather(const T* in, T* out, std::size_t n) {
    c_.all_gather(std::span<const T>(in, n), std::span<T>(out, n * size()));
  }
  comm::communicator& c_;
};

// The tensor-parallel group and the communicator it wraps, kept alive together.
class owning_group final : public model::group {
 public:
  explicit owning_group(std::unique_ptr<comm::communicator> c) : c_(std::move(c)), g_(*c_) {}
  int size() const override { return g_.size(); }
  int rank() const override { return g_.rank(); }
  void all_reduce_sum(float* d, std::size_t n) override { g_.all_reduce_sum(d, n); }
  void all_reduce_sum(double* d, std::size_t n) override { g_.all_reduce_sum(d, n); }
  void all_gather(const float* in, float* out, std::size_t n) override { g_.all_gather(in, out, n); }
  void all_gather(const double* in, double* out, std::size_t n) override { g_.all_gather(in, out, n); }
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override { g_.reduce_scatter_sum(in, out, n); }
  void reduce_scatter_sum(const double* in, double* out, std::size_t n) override { g_.reduce_scatter_sum(in, out, n); }
  void all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                          std::span<const std::size_t> recv_bytes) override {
    g_.all_to_all_v_bytes(in, send_bytes, out, recv_bytes);
  }
  void labelled(const std::string& what, int peer, const std::function<void()>& exchange) override {
    g_.labelled(what, peer, exchange);
  }
  std::unique_ptr<model::pending_shift> start_ring_shift(const std::byte* send, std::byte* recv, std::size_t n,
                                                         int step, std::string what) override {
    return g_.start_ring_shift(send, recv, n, step, std::move(what));
  }

 private:
  std::unique_ptr<comm::communicator> c_;
  communicator_group g_;
};

// Group ids outside process_groups' kinds (1..11, and 16 on for the hierarchical context-parallel
// levels): (kind << 12) | first rank, as it does. The communicators keep 17 bits of an id.
constexpr std::uint32_t expert_intra_instance_kind = 0, embedding_kind = 12, world_kind = 13, intra_instance_kind = 14,
                        inter_instance_kind = 15;

// Megatron's partial data parallelism over `all` (a data-parallel group in group order): this
// rank's consecutive part of `instances` parts (the intra-partial group) and the ranks at its place
// in every part (the inter-partial group), and which part holds it.
struct instance_split {
  comm::group intra, inter;
  int instance = 0;
};
instance_split split_into_instances(const std::vector<int>& all, int rank, int instances, std::uint32_t intra_kind) {
  const int part = static_cast<int>(all.size()) / instances;
  const int at = static_cast<int>(std::find(all.begin(), all.end(), rank) - all.begin());
  instance_split s;
  s.instance = at / part;
  s.intra.ranks.assign(all.begin() + s.instance * part, all.begin() + (s.instance + 1) * part);
  s.intra.id = (intra_kind << 12) | (static_cast<std::uint32_t>(s.intra.ranks[0]) & 0xFFF);
  for (int i = at % part; i < static_cast<int>(all.size()); i += part) s.inter.ranks.push_back(all[i]);
  s.inter.id = (inter_instance_kind << 12) | (static_cast<std::uint32_t>(s.inter.ranks[0]) & 0xFFF);
  return s;
}

}  // namespace

struct parallel_context::impl {
  comm::rendezvous rdzv;
  std::unique_ptr<comm::store_address_exchange> exchange;
};

std::unique_ptr<model::group> make_model_group(comm::communicator& c) {
  return std::make_unique<communicator_group>(c);
}

parallel_context::parallel_context(const config::megatron_args& a, const comm::launch_env& env)
    : impl_(std::make_unique<impl>()), groups_(make_groups(a, env)), local_rank_(env.local_rank) {
  if (env.world_size == 1) {
    tp_group_ = std::make_unique<model::single_group>();
    cp_group_ = std::make_unique<model::single_group>();
    ep_group_ = std::make_unique<model::single_group>();
    return;
  }
  impl_->rdzv = comm::open_rendezvous(env);
  impl_->exchange = std::make_unique<comm::store_address_exchange>(*impl_->rdzv.client);
  transport_ = std::make_unique<comm::ucx_transport>(env.rank, env.world_size, *impl_->exchange);
  // Each group's communicator says what it is doing (the inspector's activity and stall report).
  auto make = [&](const comm::group& g, const char* name) -> std::unique_ptr<comm::communicator> {
    if (g.ranks.size() < 2) return nullptr;
    auto watched = std::make_unique<comm::watched_communicator>(
        std::make_unique<comm::transport_communicator>(*transport_, g.ranks, g.id), name, g.ranks, env.rank);
    watched_.push_back(watched.get());
    return watched;
  };
  if (auto tp = make(groups_.tp_group(), "tensor-parallel"))
    tp_group_ = std::make_unique<owning_group>(std::move(tp));
  else
    tp_group_ = std::make_unique<model::single_group>();
  if (auto cp = make(groups_.cp_group(), "context-parallel"))
    cp_group_ = std::make_unique<owning_group>(std::move(cp));
  else
    cp_group_ = std::make_unique<model::single_group>();
  make_cp_levels(a, make);
  dp_ = make(groups_.dp_cp_group(), groups_.cp() > 1 ? "data-parallel (with context-parallel)" : "data-parallel");
  if (groups_.tp() > 1 && groups_.cp() > 1)
    tp_cp_group_ = std::make_unique<owning_group>(make(groups_.tp_cp_group(), "tensor and context parallel"));
  // One communicator for both uses of the tp_dp_cp group (the same ranks and group id).
  global_aux_loss_ = a.moe.num_experts && config::names_load_balancing_type(a, "global_aux_loss");
  if (global_aux_loss_ || a.transformer_engine.fp8) {
    const auto g = groups_.tp_dp_cp_group();
    if (g.ranks.size() > 1)
      tp_dp_cp_group_ = std::make_unique<owning_group>(make(g, "tensor, data and context parallel"));
  }
  if (a.moe.num_experts) {
    const auto ep = groups_.ep_group();
    ep_rank_ = static_cast<int>(std::find(ep.ranks.begin(), ep.ranks.end(), env.rank) - ep.ranks.begin());
    const auto edp = groups_.expert_dp_group();
    expert_dp_rank_ = static_cast<int>(std::find(edp.ranks.begin(), edp.ranks.end(), env.rank) - edp.ranks.begin());
    const auto etp = groups_.expert_tp_group();
    expert_tp_rank_ = static_cast<int>(std::find(etp.ranks.begin(), etp.ranks.end(), env.rank) - etp.ranks.begin());
    if (groups_.etp() > 1 && groups_.etp() != groups_.tp())
      etp_group_ = std::make_unique<owning_group>(make(etp, "expert-tensor-parallel"));
    // The experts' own groups, unless they are the dense ones (one expert-parallel rank and the
    // experts split like the dense layers: the expert-data-parallel group is the data-parallel one).
    if (config::experts_have_own_groups(a)) {
      ep_ = make(ep, "expert-parallel");
      expert_dp_ = make(edp, "expert-data-parallel");
    }
  }
  ep_group_ = ep_ ? make_model_group(*ep_) : std::make_unique<model::single_group>();
  if (const auto instances = static_cast<int>(a.distributed.num_distributed_optimizer_instances); instances > 1) {
    // Megatron's partial data parallelism: consecutive parts of the data x context group, and
    // the ranks at the same place in every part.
    const auto dense = split_into_instances(groups_.dp_cp_group().ranks, env.rank, instances, intra_instance_kind);
    optimizer_instance_ = dense.instance;
    intra_ = make(dense.intra, "data-parallel (one optimizer instance)");
    instances_ = make(dense.inter, "optimizer instances");
    // The experts' own shards: consecutive parts of the expert-data-parallel group (Megatron's
    // intra-partial expert group). Megatron sums both kinds of shard over one inter-instance
    // group, the expert one: it is the dense one wherever an instance is a block of whole
    // data-parallel replicas, which is checked here.
    if (config::experts_have_own_groups(a)) {
      const auto experts = split_into_instances(groups_.expert_dp_group().ranks, env.rank, instances,
                                                expert_intra_instance_kind);
      if (experts.inter.ranks != dense.inter.ranks || experts.instance != dense.instance)
        throw std::invalid_argument(
            "--num-distributed-optimizer-instances " + std::to_string(instances) +
            ": the expert-data-parallel group's instances are not the data-parallel group's in this layout (Megatron "
            "sums the experts' and the dense shards over one inter-instance group); use a number of instances that "
            "divides the data-parallel size");
      expert_intra_ = make(experts.intra, "expert-data-parallel (one optimizer instance)");
    }
  }
  mp_ = make(groups_.model_parallel_group(), "model-parallel");
  // The V placement (ZB-V, DualPipeV) keeps the first and the last stage on pipeline rank 0: a
  // tied embedding is summed there (grad_sync's local tie), with no group.
  const bool v_shape = config::placement_for_schedule(a.mactor.pipeline_schedule) == config::stage_placement::v_shape;
  if (groups_.pp() > 1 && !v_shape && (groups_.is_first_stage() || groups_.is_last_stage())) {
    comm::group g{{pipeline_rank_of(0), pipeline_rank_of(groups_.pp() - 1)}, 0};
    g.id = (embedding_kind << 12) | (static_cast<std::uint32_t>(g.ranks[0]) & 0xFFF);
    embedding_ = make(g, "embedding");
  }
  comm::group all{std::vector<int>(static_cast<std::size_t>(env.world_size)), world_kind << 12};
  std::iota(all.ranks.begin(), all.ranks.end(), 0);
  world_ = make(all, "world");
}

void parallel_context::make_cp_levels(const config::megatron_args& a, const make_communicator& make) {
  const auto& d = a.distributed;
  const bool hierarchical_attention =
      std::find(d.cp_comm_type.begin(), d.cp_comm_type.end(), "a2a+p2p") != d.cp_comm_type.end();
  if (groups_.cp() < 2 || !hierarchical_attention || !d.hierarchical_context_parallel_sizes) return;
  const std::vector<int> sizes(d.hierarchical_context_parallel_sizes->begin(), d.hierarchical_context_parallel_sizes->end());
  std::vector<model::group*> levels;
  for (const auto& g : groups_.hierarchical_cp_groups(sizes)) {
    const bool ring = levels.size() == 1;
    if (auto c = make(g, ring ? "context-parallel (a2a+p2p ring)" : "context-parallel (a2a+p2p all-to-all)"))
      cp_levels_.push_back(std::make_unique<owning_group>(std::move(c)));
    else
      cp_levels_.push_back(std::make_unique<model::single_group>());
    levels.push_back(cp_levels_.back().get());
  }
  cp_group_->set_levels(std::move(levels));
}

model::group* parallel_context::sequence_shards() {
  if (tp_cp_group_) return tp_cp_group_.get();
  if (groups_.tp() > 1) return tp_group_.get();
  if (groups_.cp() > 1) return cp_group_.get();
  return nullptr;
}

int parallel_context::pipeline_rank_of(int stage) const {
  auto c = groups_.coords();
  c.pp = stage;
  return groups_.rank_of(c);
}

comm::rendezvous_client* parallel_context::store() { return impl_->rdzv.client.get(); }

void parallel_context::shutdown() {
  if (transport_) transport_->shutdown();
}

parallel_context::~parallel_context() {
  // Communicators refer to the transport: drop them first. A transport that was not shut down
  // cleanly force-closes in its destructor.
  watched_.clear();
  tp_group_.reset();
  cp_group_.reset();
  cp_levels_.clear();
  tp_cp_group_.reset();
  etp_group_.reset();
  tp_dp_cp_group_.reset();
  ep_group_.reset();
  dp_.reset(), ep_.reset(), expert_dp_.reset(), intra_.reset(), expert_intra_.reset(), instances_.reset(), mp_.reset(), embedding_.reset(), world_.reset();
  transport_.reset();
}

}  // namespace mactor::training
