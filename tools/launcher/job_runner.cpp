// The launcher's main loop: spawn, then poll signals and output until every rank is gone.
#include "tools/launcher/job_runner.hpp"

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

using clock_type = std::chrono::steady_clock;
constexpr auto never = clock_type::time_point::max();

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


class job_runner {
 public:
  job_runner(const job_plan& plan, comm::rendezvous_server& store)
      : plan_(plan), generations_(plan, store),
        relay_(plan.opts.tag_output, plan.opts.timestamp_output, plan.opts.output_filename) {}

  int run();
  /// After run(): the job was ended by --timeout or a forwarded signal.
  bool stopped() const { return forwarded_ != 0 || timed_out_; }

 private:
  /// The process of `rank` at layout place `slot`; spare > 0: spare number `spare` instead.
  spawn_request request_for(int rank, int slot, int spare = 0);
  void spawn_one(int rank, int stdin_fd);
  /// Starts a spare at layout place `slot` (spare_ranks below).
  void spawn_spare(int slot);
  /// A waiting spare taken to be `rank` (its place and process now the rank's), or number 0 when
  /// none is left; the freed place is the failed rank's.
  struct taken_spare {
    int number = 0, slot = -1, freed = -1;
    pid_t pid = -1;
  };
  taken_spare take_spare(int rank);
  /// Ends the spares once the job's ranks are done (or the job is torn down).
  void dismiss_spares(int sig);
  /// Hands the process at place `slot` its variables for this generation: a signal and a file on
  /// this host, or the control-store key its remote supervisor watches.
  void restart_in_place(int slot, pid_t pid, const std::string& file, const std::vector<std::string>& lines);
  void on_exit(int rank, int status);
  // In-job restart (in_job_restart.hpp): true when the failure is handled without ending the job.
  bool restart_in_job(int rank, int status);
  void check_joins();
  void tear_down(int sig);
  void handle_signal(int sig);
  void reap();
  int poll_timeout_ms() const;
  // "pid 12 on localhost" / "agent pid 12 on node3": for a remote rank mactor sees the agent.
  std::string where(int rank, pid_t pid) const {
    int h = host_index(rank);
    return std::string(plan_.host_is_local[h] ? "pid " : "agent pid ") + std::to_string(pid) +
           " on " + plan_.layout.hosts[h].name;
  }
  const std::string& host_of(int rank) const { return plan_.layout.hosts[host_index(rank)].name; }
  int host_index(int rank) const { return plan_.layout.ranks[slot_of_[rank]].host; }

  const job_plan& plan_;
  job_generations generations_;         // the store and identity new ranks get (in-job restarts change them)
  in_job_restart_policy in_job_;
  int respawns_ = 0;                    // ranks started again within this generation
  clock_type::time_point join_by_ = never;  // --inprocess-hard-timeout: every rank has joined by then
  output_relay relay_;
  std::vector<pid_t> pid_;
  std::vector<int> slot_of_;  // rank -> the layout place its process sits in (a spare's, once it took over)
  // Spare processes (`mactor --spares`, --inprocess-active-world-size) by layout place: pid and number.
  std::map<int, std::pair<pid_t, int>> spares_;
  int next_spare_ = 1;
  int running_ = 0;
  bool tearing_down_ = false;
  int exit_code_ = 0;
  int forwarded_ = 0;           // the signal mactor forwarded to the ranks (SIGINT, SIGTERM, SIGHUP)
  bool all_exited_ok_ = true;   // every rank exited with status 0
  bool timed_out_ = false;      // --timeout ended the job
  clock_type::time_point kill_at_ = never, deadline_ = never;
};

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

bool job_runner::restart_in_job(int rank, int status) {
  if (!in_job_.enabled) return false;
  const int code = shell_status(status);
  if (code == 2 || code == 17) return false;  // a bad input or a failed result validation: no restart mends it
  const std::string what = describe_wait_status(status);
  if (!generations_.joined(rank) && respawns_ < 2 * plan_.layout.world_size()) {
    // The rank went down with the previous generation (it saw its peer vanish before it heard of
    // the restart) or before it joined this one: start it again into this generation.
    ++respawns_;
    std::fprintf(stderr, "mactor: rank %d %s before it joined in-job restart %d; starting it again\n", rank, what.c_str(),
                 generations_.number());
    spawn_one(rank, -1);
    return true;
  }
  if (in_job_.max_restarts >= 0 && generations_.number() >= in_job_.max_restarts) {
    std::fprintf(stderr, "mactor: rank %d %s; the %d in-job restarts --inprocess-max-iterations allows are used up\n",
                 rank, what.c_str(), in_job_.max_restarts);
    return false;
  }
  const taken_spare spare = take_spare(rank);
  generations_.next(slot_of_);
  respawns_ = 0;
  join_by_ = clock_type::now() + std::chrono::milliseconds(static_cast<std::int64_t>(in_job_.hard_timeout_s * 1000));
  const std::string replacement = spare.number ? "spare " + std::to_string(spare.number) + " takes over rank " +
                                                     std::to_string(rank)
                                               : "starting a new rank " + std::to_string(rank);
  std::fprintf(stderr, "mactor: rank %d %s; in-job restart %d: %s, restarting the others in place\n", rank, what.c_str(),
               generations_.number(), replacement.c_str());
  for (int r = 0; r < plan_.layout.world_size(); ++r) {
    if (r == rank) continue;
    if (pid_[r] <= 0) {
      spawn_one(r, -1);  // it had finished (status 0): the new generation needs it too
      continue;
    }
    if (plan_.host_is_local[host_index(r)] && is_stopped(pid_[r])) {
      // A stopped process cannot restart itself: it is killed and, once reaped, started again.
      std::fprintf(stderr, "mactor: rank %d (%s) is stopped; killing it to start it again\n", r, where(r, pid_[r]).c_str());
      signal_group(pid_[r], SIGKILL);
      continue;
    }
    restart_in_place(slot_of_[r], pid_[r], "rank_" + std::to_string(r), generations_.env_lines(r, slot_of_));
  }
  if (spare.number) {
    restart_in_place(spare.slot, spare.pid, "spare_" + std::to_string(spare.number),
                     generations_.env_lines(rank, slot_of_));
    spawn_spare(spare.freed);  // the failed rank's place holds a spare now
  } else {
    spawn_one(rank, -1);
  }
  return true;
}

void job_runner::restart_in_place(int slot, pid_t pid, const std::string& file, const std::vector<std::string>& lines) {
  if (!plan_.host_is_local[plan_.layout.ranks[slot].host]) {
    // Its supervisor restarts it in place (or kills it when it is stopped) on this key.
    std::string value = file + "\n";
    for (const auto& l : lines) value += l + "\n";
    generations_.control_store().set(remote_restart_key(slot, generations_.number()), value);
    return;
  }
  if (file.rfind("spare_", 0) == 0) write_env_file(generations_.dir() + "/" + file + ".env", lines);
  ::kill(pid, comm::restart_in_place_signal());
}

void job_runner::spawn_spare(int slot) {
  const int number = next_spare_++;
  spawn_request req = request_for(slot, slot, number);
  std::pair<int, int> out{-1, -1};
  if (relay_.active()) out = relay_.add_rank(slot);
  req.stdout_fd = out.first;
  req.stderr_fd = out.second;
  try {
    spares_[slot] = {spawn_rank(req), number};
  } catch (const spawn_error& e) {
    std::fprintf(stderr, "mactor: warning: spare %d on %s could not start: %s\n", number,
                 plan_.layout.hosts[plan_.layout.ranks[slot].host].name.c_str(), e.what());
  }
  if (out.first >= 0) ::close(out.first);
  if (out.second >= 0) ::close(out.second);
}

job_runner::taken_spare job_runner::take_spare(int rank) {
  for (auto it = spares_.begin(); it != spares_.end(); ++it) {
    const auto [slot, process] = *it;
    if (plan_.host_is_local[plan_.layout.ranks[slot].host] && is_stopped(process.first)) continue;
    const taken_spare taken{process.second, slot, slot_of_[rank], process.first};
    spares_.erase(it);
    slot_of_[rank] = slot;
    pid_[rank] = taken.pid;
    ++running_;
    return taken;
  }
  return {};
}

void job_runner::dismiss_spares(int sig) {
  for (const auto& [slot, process] : spares_) signal_group(process.first, sig);
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

// --inprocess-hard-timeout: ranks that have not joined the restart by now are killed (and, once
// reaped, started again); once all have joined, the clock stops.
void job_runner::check_joins() {
  if (join_by_ == never || tearing_down_) return;
  bool all = true;
  for (int r = 0; r < plan_.layout.world_size(); ++r) all = all && pid_[r] > 0 && generations_.joined(r);
  if (all) {
    join_by_ = never;
    return;
  }
  if (clock_type::now() < join_by_) return;
  for (int r = 0; r < plan_.layout.world_size(); ++r)
    if (pid_[r] > 0 && !generations_.joined(r)) {
      std::fprintf(stderr, "mactor: rank %d (%s) has not joined in-job restart %d within --inprocess-hard-timeout %g s; "
                           "killing it to start it again\n", r, where(r, pid_[r]).c_str(), generations_.number(), in_job_.hard_timeout_s);
      signal_group(pid_[r], SIGKILL);
    }
  join_by_ = never;
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

}  // namespace

job_result run_job(const job_plan& plan, comm::rendezvous_server& store) {
  job_runner runner(plan, store);
  const int code = runner.run();
  return {code, runner.stopped()};
}

}  // namespace mactor::tools
