// Joining the job's rendezvous store from a launch_env: where the store is, who hosts it, and a
// connected client (plus the server, on the rank that hosts it).
#pragma once

#include <chrono>
#include <memory>

#include "comm/launch_env.hpp"
#include "comm/rendezvous_client.hpp"
#include "comm/rendezvous_server.hpp"

namespace mactor::comm {

/// Where the store lives and whether this process must host it.
struct rendezvous_endpoint {
  host_port addr;
  bool host_here = false;
};

/// The store's address, first match wins:
///  - MACTOR_RDZV_ADDR (mactor hosts the store itself);
///  - MASTER_ADDR:(MASTER_PORT+1), hosted by rank 0 (MASTER_PORT itself is left to PyTorch-style
///    stores: torchrun's agent already listens there);
///  - a single process: a private store in this process;
///  - every rank on one node with a job id (mpirun, srun): 127.0.0.1 at a port derived from the
///    job id, hosted by rank 0.
/// Throws rendezvous_error saying to set MASTER_ADDR/MASTER_PORT when none applies.
rendezvous_endpoint resolve_rendezvous(const launch_env& env);

/// A joined rendezvous: `client` is connected; `server` is set on the rank that hosts the store
/// (keep this object alive until every rank is done with the store).
struct rendezvous {
  std::unique_ptr<rendezvous_server> server;
  std::unique_ptr<rendezvous_client> client;

  rendezvous() = default;
  rendezvous(rendezvous&&) = default;
  rendezvous& operator=(rendezvous&&) = default;
  /// On the hosting rank, waits (up to 10 s) for the other ranks to disconnect before closing
  /// the store, so a rank still reading its last reply does not lose it.
  ~rendezvous();
};

/// Resolves, hosts if this rank must, and connects within `timeout`.
rendezvous open_rendezvous(const launch_env& env,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace mactor::comm
