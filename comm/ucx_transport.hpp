// The UCX transport: tagged messages between processes over whatever UCX picks (shared
// memory, cma, TCP, RDMA). UCX itself stays behind the pimpl; include this header freely.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/transport.hpp"
#include "comm/wait_spin.hpp"

namespace mactor::comm {

struct ucx_options {
  /// How long to wait for each peer's address to appear in the exchange.
  std::chrono::milliseconds connect_timeout{60'000};
  /// How long shutdown()'s barrier waits for the slowest rank before naming it.
  std::chrono::milliseconds shutdown_timeout{30'000};
  /// UCX keepalive period, which bounds how fast a silently dead peer is noticed. UCX's own
  /// default is 20 s; an explicit UCX_KEEPALIVE_INTERVAL in the environment wins over this.
  std::string keepalive_interval = "1s";
  /// Peers on this host (same boot id and pid namespace) use shared memory and cma, which
  /// UCX 1.13 offers only without peer error handling; their death is detected by a pid
  /// watchdog instead. false: every peer gets UCP_ERR_HANDLING_MODE_PEER (TCP on one host).
  bool same_host_fast_path = true;
  /// Let the posting thread issue to UCX itself when the worker is idle (fewer thread hops);
  /// false: every operation goes through the progress thread.
  bool issue_from_caller = true;
};

/// One UCP context and worker per process, an endpoint to every rank (itself included), and a
/// progress thread that sleeps on the worker's event descriptor. A dead peer turns every
/// operation with it into an error naming its rank (within ~1 s here, a few s across hosts).
/// send/recv never wait for the network: they issue to UCX at once when the worker is idle
/// and otherwise queue for the progress thread. A thread in wait_for drives the worker itself;
/// meanwhile (and for 2 ms after, while only future operations are outstanding) the progress
/// thread stays off the worker's event fd, so a blocking caller pays one wake-up per event, as
/// a single-threaded UCX program does. Completions run on whichever thread is
/// driving the worker: the progress thread, a posting thread, or a thread inside wait_for.
/// A completion may post new operations; it must not block.
class ucx_transport final : public transport {
 public:
  /// Publishes this rank's worker address, then fetches every peer's and connects.
  ucx_transport(int rank, int world_size, address_exchange& exchange, ucx_options options = {});
  ~ucx_transport() override;
  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  int rank() const override;
  int world_size() const override;
  void send(int peer, std::uint64_t tag, const void* data, std::size_t size,
            completion done) override;
  void recv(int peer, std::uint64_t tag, void* data, std::size_t capacity,
            completion done) override;
  std::future<status> send_future(int peer, std::uint64_t tag, const void* data,
                                  std::size_t size) override;
  std::future<status> recv_future(int peer, std::uint64_t tag, void* data,
                                  std::size_t capacity) override;
  void shutdown() override;
  bool wait_for(std::future<status>& f, std::chrono::milliseconds timeout) override;
  /// Drives the worker when it is free; like a waiter, the caller keeps the progress thread
  /// parked (for waiter_linger after its last call), so one thread drives the transfer.
  bool progress() override;

  /// The UCX transports each endpoint uses, e.g. "rank 1: cma/memory sysv/memory", for logs.
  std::string describe_lanes() const;
  /// How long a thread in wait_for polls the worker before it sleeps (wait_spin_policy, and
  /// whether it adapts to the waits seen).
  const comm::wait_spin& spin() const;

  struct impl;

 private:
  void start(int peer, std::uint64_t tag, bool is_recv, const void* send_data, void* recv_data,
             std::size_t size, completion done, bool waited);
  std::unique_ptr<impl> impl_;
};

}  // namespace mactor::comm
