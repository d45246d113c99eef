// Self-pipe signal handling for the launcher's main loop and the remote supervisor.
#include "tools/launcher/signal_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace mactor::tools {
namespace {

int pipe_fds[2] = {-1, -1};  // the one piece of global state a signal handler can reach

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto w = ::write(pipe_fds[1], &b, 1);
  errno = saved;
}

}  // namespace

int install_signal_pipe() {
  if (pipe_fds[0] >= 0) return pipe_fds[0];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return pipe_fds[0];
}

std::vector<int> drain_signals() {
  std::vector<int> sigs;
  unsigned char buf[256];
  for (;;) {
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == SIGCHLD && std::count(sigs.begin(), sigs.end(), SIGCHLD)) continue;
      sigs.push_back(buf[i]);
    }
  }
  return sigs;
}

void restore_default(int sig) { ::signal(sig, SIG_DFL); }

}  // namespace mactor::tools
