// fork/exec of one rank with the set-up that keeps no orphan behind.
#include "tools/launcher/rank_process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <csignal>
#include <pthread.h>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace mactor::tools {

std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string full = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st;
    if (::stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(full.c_str(), X_OK) == 0)
      return full;
  }
  return "";
}

namespace {

// The n-th core this process may run on (wrapping), or -1.
int nth_allowed_cpu(int n) {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  int count = CPU_COUNT(&set);
  if (count == 0) return -1;
  n %= count;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set) && n-- == 0) return c;
  return -1;
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void child_exec(const spawn_request& req, const char* path, char** argv, char** envp,
                             int cpu, pid_t parent, int err_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // mactor died before the line above took effect
  int in = req.stdin_fd >= 0 ? req.stdin_fd : ::open("/dev/null", O_RDONLY);
  ::dup2(in, 0);
  if (req.stdout_fd >= 0) ::dup2(req.stdout_fd, 1);
  if (req.stderr_fd >= 0) ::dup2(req.stderr_fd, 2);
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ::sched_setaffinity(0, sizeof one, &one);
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGUSR1, SIGUSR2, SIGQUIT})
    ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  int err = errno;
  [[maybe_unused]] auto w = ::write(err_fd, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

pid_t spawn_rank(const spawn_request& req) {
  std::string path = find_in_path(req.argv.at(0));
  if (path.empty())
    throw spawn_error("cannot find program '" + req.argv[0] +
                      "' (not in PATH or not executable); give its full path");
  std::vector<char*> argv, envp;
  for (auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int cpu = req.cpu >= 0 ? nth_allowed_cpu(req.cpu) : -1;

  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw spawn_error(std::string("pipe: ") + std::strerror(errno));
  pid_t parent = ::getpid();
  // Signals stay blocked across fork so mactor's handlers never run in the child; the child
  // resets them to default and unblocks before exec.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  pid_t pid = ::fork();
  if (pid != 0) ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    throw spawn_error(std::string("fork failed: ") + std::strerror(errno) +
                      "; lower -n or raise the process limit (ulimit -u)");
  }
  if (pid == 0) child_exec(req, path.c_str(), argv.data(), envp.data(), cpu, parent, err_pipe[1]);
  ::setpgid(pid, pid);  // also here, so the group exists before we might signal it
  ::close(err_pipe[1]);
  int err = 0;
  ssize_t n;
  do n = ::read(err_pipe[0], &err, sizeof err); while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == sizeof err) {
    ::waitpid(pid, nullptr, 0);
    throw spawn_error("cannot execute '" + path + "': " + std::strerror(err));
  }
  return pid;
}

// Children of this process, from /proc (ranks' orphans land here: mactor is a subreaper).
std::vector<pid_t> own_children() {
  std::vector<pid_t> kids;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto close = line.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == ::getpid())
      kids.push_back(static_cast<pid_t>(std::atoi(entry.path().filename().c_str())));
  }
  return kids;
}

// Kills and reaps whatever the ranks left behind (daemons, children that changed process group),
// waiting at most `limit`, so no process of the job outlives mactor.
void reap_leftovers(std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    for (pid_t kid : own_children()) ::kill(kid, SIGKILL);
    int status;
    pid_t got;
    while ((got = ::waitpid(-1, &status, WNOHANG)) > 0) {}
    if (got < 0 && errno == ECHILD) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void signal_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "stopped with wait status " + std::to_string(status);
}

int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool is_stopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

}  // namespace mactor::tools
