// The variables each rank is started with: Open MPI's, torchrun's and mactor's own, then -x.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tools/launcher/host_map.hpp"

namespace mactor::tools {

/// What every rank of the job shares.
struct job_identity {
  std::string job_id;
  std::string rdzv_addr;    ///< "host:port" of mactor's store as the ranks reach it
  std::string master_addr;  ///< rank 0's host
  int master_port = 0;
  int restart_count = 0;    ///< --max-restarts: how many times the job was started again
};

using env_list = std::vector<std::pair<std::string, std::string>>;

/// The launcher's variables for `rank`, followed by its context's -x variables (a bare -x VAR
/// takes mactor's own value and is skipped when mactor has none). A `rank` at or past the
/// layout's world size is a spare at that place. slot_of[r]: the layout place rank r's process
/// sits in, when spares have taken places over (empty: rank r at place r); a rank's local rank
/// and size count the job's ranks on its host.
env_list rank_env(const job_layout& layout, const launch_options& opts, const job_identity& job,
                  int rank, const std::vector<int>& slot_of = {});

/// `base` ("KEY=VALUE" strings, e.g. environ) with `overrides` replacing or adding keys.
std::vector<std::string> merge_env(char** base, const env_list& overrides);

}  // namespace mactor::tools
