// The rank's half of mactor's in-job restart (pretrain_gpt --inprocess-restart under `mactor`):
// when the launcher replaces a rank that died or hung, it tells every other rank to start its
// program again in place, as the same process (pid, pipes and node memory kept), with the new
// generation's rendezvous variables; all of them then roll back to the newest checkpoint they
// share (a replicated local one in memory, see checkpoint/replication.hpp) and train on.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace mactor::comm {

/// The signal the launcher sends a surviving rank: SIGRTMIN + 3.
int restart_in_place_signal();

/// The variable naming the folder of the launcher's per-generation files: <dir>/rank_<N>.env
/// holds rank N's variables ("KEY=VALUE" lines) for the generation it is to restart into, and
/// <dir>/spare_<K>.env spare K's, when the launcher makes it the rank it replaces.
inline constexpr const char* restart_in_place_dir_variable = "MACTOR_RESTART_IN_PLACE_DIR";

/// The variable marking a spare process (`mactor --spares`, --inprocess-active-world-size): its
/// number K >= 1; absent, empty or 0 in a rank.
inline constexpr const char* spare_variable = "MACTOR_SPARE";

/// This process's spare number (0: it is a rank).
int spare_id();
/// The name of this process's variable file without ".env": spare_<K> or rank_<MACTOR_RANK>.
std::string restart_file_name();
/// A spare process: says so and waits, never returning; when the launcher gives it a failed
/// rank's place the restart watcher (watch_for_restart_in_place, called before) execs it as that
/// rank.
[[noreturn]] void wait_as_spare();

/// When MACTOR_RESTART_IN_PLACE_DIR is set: installs a handler for the signal (whichever thread
/// gets it, a library's included, wakes a watcher thread through a pipe) and starts the watcher.
/// On the signal: output flushed, the variables of <dir>/rank_<MACTOR_RANK>.env set, every file
/// descriptor but 0-2 closed at exec, and /proc/self/exe started again with `argv`.
void watch_for_restart_in_place(char** argv);

/// Whether watch_for_restart_in_place is waiting for the launcher's signal.
bool restart_in_place_watched();

/// Runs `hook` on the watcher thread just before a restart in place execs the program again: what
/// this image leaves on disk that its normal exit would remove (the inspector's token file). A
/// hook must be thread-safe and quick.
void before_restart_in_place(std::function<void()> hook);

/// A rank whose peer failed, under in-job restart: the launcher, which saw the peer go, will tell
/// this rank to restart in place, so it waits up to `limit` for that (the watcher execs the
/// program meanwhile) instead of ending and being replaced too. Returns when no restart came.
void await_restart_in_place(std::chrono::milliseconds limit);

}  // namespace mactor::comm
