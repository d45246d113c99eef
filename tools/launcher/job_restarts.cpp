// The job runner's in-job restarts (in_job_restart.hpp): a failed rank replaced by a new process
// or a waiting spare while the others restart in place, here or on other hosts
// (remote_restart.hpp); the spares themselves; the hard timeout on joining a restart.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/restart_in_place.hpp"
#include "tools/launcher/job_runner_impl.hpp"
#include "tools/launcher/remote_restart.hpp"

namespace mactor::tools {

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

}  // namespace mactor::tools
