// The launcher's main loop: spawn, then poll signals and output until every rank is gone.
#include "tools/launcher/job_runner_impl.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>

#include "comm/restart_in_place.hpp"
#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/job_generations.hpp"
#include "tools/launcher/output_relay.hpp"
#include "tools/launcher/rank_process.hpp"
#include "tools/launcher/remote_exec.hpp"
#include "tools/launcher/remote_restart.hpp"
#include "tools/launcher/signal_pipe.hpp"

extern char** environ;

namespace mactor::tools {
namespace {

// Copies mactor's stdin into rank 0's until end of file; runs detached (it may block forever).
void forward_stdin(int to) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ::close(to);
        return;
      }
      off += w;
    }
  }
  ::close(to);
}

}  // namespace

spawn_request job_runner::request_for(int rank, int slot, int spare) {
  const auto& L = plan_.layout;
  const rank_placement& p = L.ranks[slot];
  env_list env = rank_env(L, plan_.opts, generations_.identity(), spare > 0 ? slot : rank, slot_of_);
  if (in_job_.enabled) env.emplace_back(comm::restart_in_place_dir_variable, generations_.dir());
  if (spare > 0) env.emplace_back(comm::spare_variable, std::to_string(spare));
  int cpu = plan_.opts.bind == bind_policy::core ? p.local_rank : -1;
  spawn_request req;
  if (plan_.host_is_local[p.host]) {
    req.argv = plan_.opts.contexts[p.context].argv;
    req.env = merge_env(environ, env);
    req.cpu = cpu;
    return req;
  }
  remote_spec spec;
  spec.rank = slot;
  spec.argv = plan_.opts.contexts[p.context].argv;
  spec.env = std::move(env);
  spec.rdzv_addr = plan_.identity.rdzv_addr;  // the control store
  spec.generation = generations_.number();
  spec.cpu = cpu;
  spec.stdin_from_agent = rank == 0 && spare == 0;
  spec.grace_s = plan_.opts.kill_grace_s;
  req.argv = plan_.opts.rsh_agent;
  req.argv.push_back(L.hosts[p.host].name);
  req.argv.insert(req.argv.end(), {plan_.remote_mactor, "--remote-exec", encode_remote_spec(spec)});
  req.env = merge_env(environ, {});
  return req;
}

void job_runner::spawn_one(int r, int stdin_fd) {
  spawn_request req = request_for(r, slot_of_[r]);
  std::pair<int, int> out{-1, -1};
  if (relay_.active()) out = relay_.add_rank(r);
  req.stdout_fd = out.first;
  req.stderr_fd = out.second;
  req.stdin_fd = stdin_fd;
  try {
    pid_[r] = spawn_rank(req);
    ++running_;
  } catch (const spawn_error& e) {
    std::fprintf(stderr, "mactor: error: rank %d on %s: %s\n", r, host_of(r).c_str(), e.what());
    exit_code_ = 2;
    tear_down(SIGTERM);
  }
  if (out.first >= 0) ::close(out.first);
  if (out.second >= 0) ::close(out.second);
}






void job_runner::tear_down(int sig) {
  if (!tearing_down_) {
    tearing_down_ = true;
    generations_.control_store().set(abort_key, "");  // remote supervisors stop their ranks when they see this
    kill_at_ = clock_type::now() +
               std::chrono::milliseconds(static_cast<int64_t>(plan_.opts.kill_grace_s * 1000));
  }
  for (pid_t pid : pid_)
    if (pid > 0) signal_group(pid, sig);
  dismiss_spares(sig);
}

void job_runner::on_exit(int rank, int status) {
  pid_t pid = pid_[rank];
  pid_[rank] = -1;
  --running_;
  signal_group(pid, SIGKILL);  // anything the rank left behind in its process group
  bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (failed && !tearing_down_ && restart_in_job(rank, status)) return;
  if (failed) all_exited_ok_ = false;
  if (!failed || tearing_down_) return;
  exit_code_ = shell_status(status);
  std::fprintf(stderr, "mactor: rank %d (%s) %s%s\n", rank, where(rank, pid).c_str(),
               describe_wait_status(status).c_str(),
               running_ > 0 ? "; stopping the other ranks" : "");
  tear_down(SIGTERM);
}

void job_runner::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t r = 0; r < pid_.size(); ++r)
      if (pid_[r] == pid) on_exit(static_cast<int>(r), status);
    for (auto it = spares_.begin(); it != spares_.end(); ++it)
      if (it->second.first == pid) {
        if (!tearing_down_ && running_ > 0)
          std::fprintf(stderr, "mactor: warning: spare %d %s; %zu spare(s) left\n", it->second.second,
                       describe_wait_status(status).c_str(), spares_.size() - 1);
        spares_.erase(it);
        break;
      }
  }
}

void job_runner::handle_signal(int sig) {
  if (sig == SIGCHLD) return reap();
  if (sig == SIGUSR1 || sig == SIGUSR2) {
    for (pid_t pid : pid_)
      if (pid > 0) signal_group(pid, sig);
    return;
  }
  if (tearing_down_) {
    if (sig == SIGINT) tear_down(SIGKILL);  // a second Ctrl-C does not wait for the grace period
    return;
  }
  std::fprintf(stderr, "mactor: got %s; forwarding it to every rank\n", ::strsignal(sig));
  exit_code_ = 128 + sig;
  forwarded_ = sig;
  tear_down(sig);
}


int job_runner::poll_timeout_ms() const {
  auto next = std::min({kill_at_, deadline_, join_by_});
  if (next == never) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - clock_type::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()) + 1);
}

int job_runner::run() {
  int sig_fd = install_signal_pipe();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphans of ranks become ours to kill and reap
  const int n = plan_.layout.world_size();
  pid_.assign(n, -1);
  slot_of_.resize(std::size_t(n));
  std::iota(slot_of_.begin(), slot_of_.end(), 0);
  in_job_ = plan_.in_job;
  if (in_job_.enabled) generations_.enable();
  if (plan_.opts.timeout_s > 0)
    deadline_ = clock_type::now() +
                std::chrono::milliseconds(static_cast<int64_t>(plan_.opts.timeout_s * 1000));
  int stdin_pipe[2] = {-1, -1};
  if (::pipe2(stdin_pipe, O_CLOEXEC) != 0) stdin_pipe[0] = stdin_pipe[1] = -1;
  for (int r = 0; r < n && !tearing_down_; ++r) {
    spawn_one(r, r == 0 ? stdin_pipe[0] : -1);
    for (int sig : drain_signals()) handle_signal(sig);
  }
  for (int slot = n; slot < plan_.layout.processes() && !tearing_down_; ++slot) spawn_spare(slot);
  if (stdin_pipe[0] >= 0) ::close(stdin_pipe[0]);
  if (stdin_pipe[1] >= 0) std::thread(forward_stdin, stdin_pipe[1]).detach();

  auto drain_until = never;
  while (running_ > 0 || (relay_.open_streams() && clock_type::now() < drain_until)) {
    std::vector<pollfd> fds = relay_.poll_fds();
    fds.push_back({sig_fd, POLLIN, 0});
    int timeout = poll_timeout_ms();
    if (running_ == 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - clock_type::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    ::poll(fds.data(), fds.size(), timeout);
    for (auto& f : fds)
      if (f.fd != sig_fd && f.revents) relay_.on_readable(f.fd);
    for (int sig : drain_signals()) handle_signal(sig);
    reap();  // also catches a SIGCHLD that raced with the previous drain
    check_joins();
    auto now = clock_type::now();
    if (now >= deadline_ && !tearing_down_) {
      std::fprintf(stderr, "mactor: the job ran past --timeout %g s; stopping every rank\n",
                   plan_.opts.timeout_s);
      exit_code_ = 124;
      timed_out_ = true;
      tear_down(SIGTERM);
    }
    if (now >= kill_at_) {
      for (int r = 0; r < n; ++r)
        if (pid_[r] > 0)
          std::fprintf(stderr, "mactor: rank %d (%s) %s for %g s; killing it\n", r, where(r, pid_[r]).c_str(),
                       is_stopped(pid_[r]) ? "is stopped (SIGSTOP or a debugger) and could not act on SIGTERM"
                                           : "ignored SIGTERM",
                       plan_.opts.kill_grace_s);
      tear_down(SIGKILL);
      kill_at_ = never;
    }
    if (running_ == 0 && drain_until == never) {
      drain_until = now + std::chrono::seconds(2);
      dismiss_spares(SIGKILL);  // the job is over: nothing is left for them to replace
    }
  }
  relay_.flush_all();
  reap_leftovers(std::chrono::seconds(2));
  if (forwarded_ && all_exited_ok_) {
    // The ranks handled the signal (pretrain_gpt --exit-signal-handler saves and exits 0).
    std::fprintf(stderr, "mactor: every rank exited with status 0 after %s\n", ::strsignal(forwarded_));
    return 0;
  }
  return exit_code_;
}

job_result run_job(const job_plan& plan, comm::rendezvous_server& store) {
  job_runner runner(plan, store);
  const int code = runner.run();
  return {code, runner.stopped()};
}

}  // namespace mactor::tools
