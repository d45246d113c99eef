// Wires the rendezvous store, the UCX transport and the ring collectives together for one job.
#include "training/job_world.hpp"

#include <numeric>
#include <string>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/rendezvous.hpp"
#include "comm/store_address_exchange.hpp"
#include "comm/transport.hpp"
#include "comm/ucx_transport.hpp"

namespace mactor::training {
struct job_world::impl {
  comm::rendezvous rdzv;
  std::unique_ptr<comm::store_address_exchange> exchange;
  std::unique_ptr<comm::ucx_transport> transport;
  std::unique_ptr<comm::transport_communicator> dp;
};

job_world::job_world(const comm::launch_env& env) : impl_(std::make_unique<impl>()) {
  impl_->rdzv = comm::open_rendezvous(env);
  impl_->exchange = std::make_unique<comm::store_address_exchange>(*impl_->rdzv.client);
  impl_->transport = std::make_unique<comm::ucx_transport>(env.rank, env.world_size, *impl_->exchange);
  std::vector<int> members(static_cast<std::size_t>(env.world_size));
  std::iota(members.begin(), members.end(), 0);
  impl_->dp = std::make_unique<comm::transport_communicator>(*impl_->transport, members, /*group_id=*/1);
  dp_ = impl_->dp.get();
}

job_world::~job_world() {
  if (impl_ && impl_->transport) {
    try {
      impl_->transport->shutdown();
    } catch (const std::exception&) {
      // A peer already gone at shutdown: the job's outcome was decided before this point.
    }
  }
}

}  // namespace mactor::training
