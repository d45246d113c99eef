// Finds and joins the job's rendezvous store (see resolve_rendezvous for the rules).
#include "comm/rendezvous.hpp"

#include <functional>

namespace mactor::comm {

rendezvous_endpoint resolve_rendezvous(const launch_env& env) {
  if (!env.rdzv_addr.empty()) return {parse_host_port(env.rdzv_addr), false};
  if (!env.master_addr.empty() && env.master_port > 0) {
    if (env.master_port >= 65535)
      throw rendezvous_error("MASTER_PORT=" + std::to_string(env.master_port) +
                             " leaves no room for the store at MASTER_PORT+1; pick a lower port");
    return {{env.master_addr, env.master_port + 1}, env.rank == 0};
  }
  if (env.world_size == 1) return {{"127.0.0.1", 0}, true};
  if (env.local_world_size == env.world_size && !env.job_id.empty()) {
    // Below Linux's ephemeral range (32768-60999 by default), where a busy host's outgoing
    // connections would otherwise take the port now and then.
    int port = 20000 + static_cast<int>(std::hash<std::string>{}(env.job_id) % 12000);
    return {{"127.0.0.1", port}, env.rank == 0};
  }
  throw rendezvous_error(std::string("cannot find the rendezvous store for a job that spans nodes "
                                     "under ") + launcher_name(env.launcher) +
                         ": set MASTER_ADDR (rank 0's host) and MASTER_PORT (a free port; the "
                         "store uses MASTER_PORT+1), or launch with mactor");
}

rendezvous::~rendezvous() {
  client.reset();
  if (server) server->wait_until_idle(std::chrono::seconds(10));
}

rendezvous open_rendezvous(const launch_env& env, std::chrono::milliseconds timeout) {
  rendezvous_endpoint ep = resolve_rendezvous(env);
  rendezvous r;
  if (ep.host_here) {
    r.server = std::make_unique<rendezvous_server>(ep.addr.port);
    ep.addr = {"127.0.0.1", r.server->port()};
  }
  r.client = std::make_unique<rendezvous_client>(ep.addr, timeout);
  return r;
}

}  // namespace mactor::comm
