// Ranks on other hosts: mactor runs "AGENT HOST mactor --remote-exec SPEC" (AGENT is ssh or any
// rsh-like command such as "ip netns exec"). SPEC is hex, so no shell on the way can mangle it.
// The remote mactor supervises the rank: it forwards signals, stops the rank when the job is
// aborted ("mactor/abort" appears in the control store) or mactor's store goes away, and under
// in-job restart hands the rank its restarts (remote_restart.hpp).
#pragma once

#include <string>

#include "tools/launcher/rank_env.hpp"

namespace mactor::tools {

struct remote_spec {
  int rank = 0;
  std::vector<std::string> argv;
  env_list env;            ///< set on top of the remote environment
  std::string rdzv_addr;   ///< mactor's control store (the first generation's), watched for "mactor/abort"
  int cpu = -1;            ///< --bind-to core: local rank; -1: no pinning
  bool stdin_from_agent = false;  ///< rank 0 reads the agent's stdin
  double grace_s = 5;
  int generation = 0;      ///< the in-job restart the rank starts in (it awaits the later ones)
};

/// The key mactor sets in its store when it tears the job down.
inline constexpr const char* abort_key = "mactor/abort";

std::string encode_remote_spec(const remote_spec& spec);
/// Throws usage_error when `hex` is not a spec written by encode_remote_spec.
remote_spec decode_remote_spec(const std::string& hex);

/// `mactor --remote-exec SPEC`: starts the rank and exits with its status (re-raising the signal
/// that killed it, so the agent reports the same thing).
int remote_exec_main(const std::string& hex);

}  // namespace mactor::tools
