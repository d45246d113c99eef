// In-job restart (in_job_restart.hpp) of ranks on other hosts. The launcher cannot signal a
// remote rank nor write into its host's files, so it puts a surviving rank's variables for the
// new generation in the job's control store (the first generation's, which lives as long as the
// launcher) under remote_restart_key; the rank's remote supervisor (`mactor --remote-exec`)
// watches for that key, writes the variables where the rank's restart-in-place watcher reads
// them (a folder of its own host) and gives the rank the restart signal. A rank that is stopped
// cannot act on it: the supervisor kills it instead, and the launcher starts it again when the
// agent reports the exit. A rank that died is started again through its agent as any rank is.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>

#include "comm/rendezvous_client.hpp"

namespace mactor::tools {

/// Waits for `key` in the control store, however long the job runs: its value, or nullopt once
/// the store is gone (the job is over). The supervisor's watches for the abort and the restarts.
std::optional<std::string> await_control_key(comm::rendezvous_client& store, const std::string& key);

/// The control-store key for the process at layout place `slot` (a rank's, or a spare's) in
/// in-job restart `generation`. Its value: the name of the variable file the process reads
/// (comm::restart_file_name: rank_<N> or spare_<K>), then its variables, one "KEY=VALUE" a line.
std::string remote_restart_key(int slot, int generation);

/// The supervisor's watch, on a thread of its own until the process ends: for generations after
/// `generation` in turn, waits for place `slot`'s key in the store at `control_addr`, writes its
/// variables to <env_dir>/<name>.env and signals `child` (comm::restart_in_place_signal), or
/// kills its process group when it is stopped. A child of 0 or less (gone) is left alone.
void watch_remote_restarts(std::string control_addr, int slot, int generation, std::string env_dir,
                           const std::atomic<pid_t>& child);

}  // namespace mactor::tools
