// Starting one rank's process: its own process group (so a signal reaches everything it forks),
// PR_SET_PDEATHSIG so it dies with mactor, optional core pinning, and exec errors reported back.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace mactor::tools {

struct spawn_request {
  std::vector<std::string> argv;  ///< argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   ///< full environment, "KEY=VALUE"
  int stdin_fd = -1;              ///< -1: /dev/null
  int stdout_fd = -1;             ///< -1: inherit mactor's
  int stderr_fd = -1;             ///< -1: inherit mactor's
  int cpu = -1;                   ///< pin to this core (index among the allowed cores), -1: no
};

/// A program that cannot be started (not found, not executable); names it and the reason.
struct spawn_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Finds `program` in PATH as execvp would; returns "" when it is not there.
std::string find_in_path(const std::string& program);

/// Forks and execs; returns once the exec succeeded (the pid is its process group id too).
/// Call from the main thread: the death signal follows the thread that forked.
pid_t spawn_rank(const spawn_request& req);

/// This process's children, read from /proc.
std::vector<pid_t> own_children();

/// Kills and reaps every remaining child (with PR_SET_CHILD_SUBREAPER set, that includes the
/// ranks' orphans), waiting at most `limit`, so nothing of the job outlives its launcher.
void reap_leftovers(std::chrono::milliseconds limit);

/// Signals a rank's whole process group.
void signal_group(pid_t pgid, int sig);

/// "exited with status 3" / "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);
/// The status a shell would report: the exit code, or 128 + signal.
int shell_status(int status);

/// True when a process of this host is stopped (state T or t in /proc/PID/stat).
bool is_stopped(pid_t pid);

}  // namespace mactor::tools
