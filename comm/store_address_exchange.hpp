// An address_exchange over the job's rendezvous store (comm/rendezvous_client.hpp): how the
// UCX transport finds its peers when started by mactor, mpirun, srun or torchrun.
#pragma once

#include <string>

#include "comm/rendezvous_client.hpp"
#include "comm/transport.hpp"

namespace mactor::comm {

/// The job's UCX transport publishes rank N's address under this prefix + N (the launcher reads
/// it to tell that a rank has joined an in-job restart's rendezvous).
inline constexpr const char* transport_address_prefix = "ucx_address/";

class store_address_exchange final : public address_exchange {
 public:
  /// Keys are `prefix` + rank; use a distinct prefix per transport in one job.
  explicit store_address_exchange(rendezvous_client& client, std::string prefix = transport_address_prefix);
  void publish(int rank, const std::vector<std::byte>& address) override;
  std::vector<std::byte> fetch(int rank, std::chrono::milliseconds timeout) override;

 private:
  rendezvous_client& client_;
  std::string prefix_;
};

}  // namespace mactor::comm
