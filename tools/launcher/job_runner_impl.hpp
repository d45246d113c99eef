// The launcher's job runner (job_runner.hpp's run_job) as a class: its main loop and rank
// processes (job_runner.cpp), and its in-job restarts and spare processes (job_restarts.cpp).
// Internal to tools/launcher.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/rendezvous_server.hpp"
#include "tools/launcher/in_job_restart.hpp"
#include "tools/launcher/job_generations.hpp"
#include "tools/launcher/job_runner.hpp"
#include "tools/launcher/output_relay.hpp"
#include "tools/launcher/rank_process.hpp"

namespace mactor::tools {

using clock_type = std::chrono::steady_clock;
inline constexpr auto never = clock_type::time_point::max();

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

}  // namespace mactor::tools
