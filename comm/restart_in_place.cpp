// A rank restarting in place: a thread that waits for the launcher's signal and execs the program again.
#include "comm/restart_in_place.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mactor::comm {
namespace {

// Sets each "KEY=VALUE" line of `path`; false when it cannot be read.
bool set_variables_from(const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && eq > 0) ::setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 1);
  }
  return true;
}

// The old image's sockets, pipes and UCX handles must not live on in the new one (a peer would
// keep seeing an open connection): every descriptor but stdin, stdout and stderr closes at exec.
void close_on_exec_beyond_stdio() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  const int own = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd > 2 && fd != own) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::closedir(d);
}

// The signal handler's pipe to the watcher thread (a handler may run on any thread, libraries'
// included, and may do little more than write).
int wake_fds[2] = {-1, -1};

void on_restart_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const auto n = ::write(wake_fds[1], &byte, 1);
}

std::mutex hooks_mutex;
std::vector<std::function<void()>> hooks;  // before_restart_in_place's

void wait_and_restart(char** argv) {
  char byte = 0;
  while (::read(wake_fds[0], &byte, 1) != 1) {
  }
  {
    std::lock_guard lock(hooks_mutex);
    for (const auto& hook : hooks) hook();
  }
  const char* dir = std::getenv(restart_in_place_dir_variable);
  const char* rank = std::getenv("MACTOR_RANK");
  const std::string file = std::string(dir ? dir : ".") + "/" + restart_file_name() + ".env";
  const int spare = spare_id();
  std::fflush(stdout);
  if (!set_variables_from(file)) {
    std::fprintf(stderr, "mactor: rank %s: cannot read %s to restart in place; ending this rank\n", rank ? rank : "?",
                 file.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  rank = std::getenv("MACTOR_RANK");  // a spare's is the rank it takes over now
  const char* count = std::getenv("MACTOR_RESTART_COUNT");
  if (spare > 0)
    std::fprintf(stderr, "mactor: spare %d: taking over rank %s (restart %s of the job)\n", spare, rank ? rank : "?",
                 count ? count : "?");
  else
    std::fprintf(stderr, "mactor: rank %s: restarting in place (restart %s of the job)\n", rank ? rank : "?",
                 count ? count : "?");
  std::fflush(stderr);
  close_on_exec_beyond_stdio();
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "mactor: rank %s: cannot exec /proc/self/exe to restart in place\n", rank ? rank : "?");
  std::_Exit(1);
}

std::atomic<bool> watching{false};

}  // namespace

int restart_in_place_signal() { return SIGRTMIN + 3; }

int spare_id() {
  const char* s = std::getenv(spare_variable);
  return s && *s ? std::atoi(s) : 0;
}

std::string restart_file_name() {
  if (const int id = spare_id(); id > 0) return "spare_" + std::to_string(id);
  const char* rank = std::getenv("MACTOR_RANK");
  return std::string("rank_") + (rank ? rank : "0");
}

void wait_as_spare() {
  std::fprintf(stderr, "mactor: spare %d (pid %d) is waiting to take over a failed rank\n", spare_id(),
               static_cast<int>(::getpid()));
  std::fflush(stderr);
  for (;;) ::pause();  // the watcher execs this process as the rank it replaces
}

bool restart_in_place_watched() { return watching.load(); }

void before_restart_in_place(std::function<void()> hook) {
  std::lock_guard lock(hooks_mutex);
  hooks.push_back(std::move(hook));
}

void await_restart_in_place(std::chrono::milliseconds limit) {
  if (!restart_in_place_watched()) return;
  std::fprintf(stderr, "mactor: rank %s: waiting up to %lld s for the launcher to restart this rank in place\n",
               std::getenv("MACTOR_RANK") ? std::getenv("MACTOR_RANK") : "?", static_cast<long long>(limit.count() / 1000));
  std::fflush(stderr);
  std::this_thread::sleep_for(limit);
}

void watch_for_restart_in_place(char** argv) {
  if (!std::getenv(restart_in_place_dir_variable)) return;
  if (::pipe2(wake_fds, O_CLOEXEC) != 0) return;
  struct sigaction action {};
  action.sa_handler = on_restart_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (::sigaction(restart_in_place_signal(), &action, nullptr) != 0) return;
  // A signal an earlier image left blocked (the mask survives exec) is let through again.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, restart_in_place_signal());
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  watching = true;
  std::thread(wait_and_restart, argv).detach();
}

}  // namespace mactor::comm
