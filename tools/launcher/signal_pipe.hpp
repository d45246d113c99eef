// Turns the signals mactor handles (SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) into bytes
// on a pipe, so the main loop sees them in poll() next to the ranks' output.
#pragma once

#include <vector>

namespace mactor::tools {

/// Installs the handlers (once per process) and ignores SIGPIPE; returns the pipe's read end.
int install_signal_pipe();

/// The signals received since the last call, in order (SIGCHLD at most once per call).
std::vector<int> drain_signals();

/// Puts the default action back for `sig` (before re-raising it on ourselves).
void restore_default(int sig);

}  // namespace mactor::tools
