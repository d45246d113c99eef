// The remote side of a launch: decode the spec, start the rank, watch for the job's abort.
#include "tools/launcher/remote_exec.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <cstdio>
#include <thread>

#include "comm/rendezvous_client.hpp"
#include "comm/rendezvous_wire.hpp"
#include "comm/restart_in_place.hpp"
#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/launch_options.hpp"
#include "tools/launcher/rank_process.hpp"
#include "tools/launcher/remote_restart.hpp"
#include "tools/launcher/signal_pipe.hpp"

extern char** environ;

namespace mactor::tools {

std::string encode_remote_spec(const remote_spec& spec) {
  comm::wire_writer w;
  w.bytes("mactor-remote-2");
  w.u64(static_cast<uint64_t>(spec.rank));
  w.u64(spec.argv.size());
  for (auto& a : spec.argv) w.bytes(a);
  w.u64(spec.env.size());
  for (auto& [k, v] : spec.env) {
    w.bytes(k);
    w.bytes(v);
  }
  w.bytes(spec.rdzv_addr);
  w.u64(static_cast<uint64_t>(static_cast<int64_t>(spec.cpu)));
  w.u8(spec.stdin_from_agent ? 1 : 0);
  w.u64(static_cast<uint64_t>(spec.grace_s * 1000));
  w.u64(static_cast<uint64_t>(spec.generation));
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : w.data()) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

remote_spec decode_remote_spec(const std::string& hex) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw usage_error("--remote-exec takes a spec written by mactor itself; it is not for users");
  };
  if (hex.size() % 2) nibble('x');
  std::string raw;
  for (size_t i = 0; i < hex.size(); i += 2)
    raw.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  try {
    comm::wire_reader r(raw);
    if (r.bytes() != "mactor-remote-2")
      throw usage_error("--remote-exec: spec from a different mactor version; install the same "
                        "mactor on every host");
    remote_spec s;
    s.rank = static_cast<int>(r.u64());
    s.argv.resize(r.u64());
    for (auto& a : s.argv) a = r.bytes();
    s.env.resize(r.u64());
    for (auto& [k, v] : s.env) {
      k = r.bytes();
      v = r.bytes();
    }
    s.rdzv_addr = r.bytes();
    s.cpu = static_cast<int>(static_cast<int64_t>(r.u64()));
    s.stdin_from_agent = r.u8() != 0;
    s.grace_s = static_cast<double>(r.u64()) / 1000;
    s.generation = static_cast<int>(r.u64());
    if (s.argv.empty()) throw usage_error("--remote-exec: spec has no program");
    return s;
  } catch (const comm::rendezvous_error&) {
    throw usage_error("--remote-exec: truncated spec; it is written by mactor, not by users");
  }
}

namespace {

// Blocks until the job is aborted or the store disappears, then writes one byte to `fd`.
void watch_abort(std::string rdzv_addr, int fd) {
  try {
    comm::rendezvous_client store(comm::parse_host_port(rdzv_addr), std::chrono::seconds(30));
    await_control_key(store, abort_key);  // the abort, or the store gone: either way the rank stops
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mactor: remote supervisor: %s; stopping this rank\n", e.what());
  }
  char b = 1;
  [[maybe_unused]] auto w = ::write(fd, &b, 1);
}

}  // namespace

int remote_exec_main(const std::string& hex) {
  remote_spec spec = decode_remote_spec(hex);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the agent (or mactor, for "ip netns exec") went away
  // Under in-job restart the rank reads its next generation's variables from a folder of this
  // host, which the restart watch fills from the control store (remote_restart.hpp).
  std::string restart_dir;
  for (auto& [k, v] : spec.env)
    if (k == comm::restart_in_place_dir_variable) v = restart_dir = make_restart_dir();
  int sig_fd = install_signal_pipe();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // the rank's orphans become ours to kill and reap
  spawn_request req;
  req.argv = spec.argv;
  req.env = merge_env(environ, spec.env);
  req.stdin_fd = spec.stdin_from_agent ? 0 : -1;
  req.cpu = spec.cpu;
  pid_t child;
  try {
    child = spawn_rank(req);
  } catch (const spawn_error& e) {
    std::fprintf(stderr, "mactor: rank %d: %s\n", spec.rank, e.what());
    return 127;
  }
  int abort_pipe[2];
  if (::pipe(abort_pipe) != 0) return 1;
  if (!spec.rdzv_addr.empty()) std::thread(watch_abort, spec.rdzv_addr, abort_pipe[1]).detach();
  static std::atomic<pid_t> watched_child{0};  // static: the detached watch may outlive this frame
  watched_child = child;
  if (!restart_dir.empty() && !spec.rdzv_addr.empty())
    std::thread(watch_remote_restarts, spec.rdzv_addr, spec.rank, spec.generation, restart_dir,
                std::cref(watched_child))
        .detach();

  auto kill_at = std::chrono::steady_clock::time_point::max();
  auto stop = [&](int sig) {
    signal_group(child, sig);
    if (kill_at == std::chrono::steady_clock::time_point::max())
      kill_at = std::chrono::steady_clock::now() +
                std::chrono::milliseconds(static_cast<int64_t>(spec.grace_s * 1000));
  };
  for (;;) {
    int wait_ms = -1;
    if (kill_at != std::chrono::steady_clock::time_point::max()) {
      auto left = kill_at - std::chrono::steady_clock::now();
      wait_ms = std::max<int>(0, static_cast<int>(
                                     std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
    }
    pollfd fds[2] = {{sig_fd, POLLIN, 0}, {abort_pipe[0], POLLIN, 0}};
    ::poll(fds, 2, wait_ms);
    if (kill_at != std::chrono::steady_clock::time_point::max() &&
        std::chrono::steady_clock::now() >= kill_at)
      signal_group(child, SIGKILL);
    if (fds[1].revents) {
      ::close(abort_pipe[0]);
      abort_pipe[0] = -1;
      stop(SIGTERM);
    }
    for (int sig : drain_signals()) {
      if (sig == SIGUSR1 || sig == SIGUSR2) signal_group(child, sig);
      else if (sig != SIGCHLD) stop(sig);
    }
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      watched_child = 0;
      signal_group(child, SIGKILL);  // whatever the rank left in its group goes with it
      reap_leftovers(std::chrono::seconds(2));
      if (!restart_dir.empty()) std::filesystem::remove_all(restart_dir);
      if (WIFSIGNALED(status)) {
        restore_default(WTERMSIG(status));
        ::kill(::getpid(), WTERMSIG(status));
      }
      return shell_status(status);
    }
  }
}

}  // namespace mactor::tools
