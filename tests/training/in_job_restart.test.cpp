// In-job restart (pretrain_gpt --inprocess-restart under mactor): a rank killed (SIGKILL, its node
// memory deleted with it) or stopped (SIGSTOP) mid-training is replaced while the job runs, with no
// --max-restarts: by a new process, or by a waiting spare (mactor --spares, or the program's
// --inprocess-active-world-size); the other rank restarts in place as the same process; ranks on
// other hosts (loopback addresses that are not this host's, through the test agent) take part
// through their remote supervisors. Every loss after the restored iteration equals an
// uninterrupted run's, bit for bit.
#include <catch2/catch.hpp>

#include "tests/training/restart_support.hpp"

using namespace mactor::test;
using namespace mactor::test::restart;

namespace {

const std::string agent = " --launch-agent " + std::string(MACTOR_SOURCE_DIR) + "/tests/tools/fake_agent.sh";

// Rank 1 killed after iteration 45 of a 2-rank job under `launcher_flags` (`processes` in all,
// spares included) with local checkpoints replicated in memory and the program's in-job restart
// (`program_flags` added): the launcher's stderr holds `lines`, rank 1 restores its state from
// rank 0's replica, no whole-job restart happens, and the losses carry on.
restarted_job recover_from_kill(const std::string& name, const std::string& launcher_flags,
                                const std::string& program_flags, std::size_t processes,
                                const std::vector<std::string>& lines) {
  const fs::path dir = scratch_dir("job_restart", name);
  fs::create_directories(dir);
  const fs::path memory = node_memory(dir, name);
  const std::string local = replicated_in_memory(memory) + " --inprocess-restart" + program_flags;
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, launcher_flags, flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); },
                                    SIGKILL, processes);
  check_recovered(job, reference, 40, lines);
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  CHECK(job.out.find("rank 1: restored its local checkpoint of iteration " + std::to_string(job.resumed_from) +
                     " from rank 0's replica") != std::string::npos);
  REQUIRE(job.ranks_before.size() == processes);
  REQUIRE(job.ranks_after.size() == processes);
  // Rank 0 restarted in place: the same process. The killed one is gone.
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[0]) == 1);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[1]) == 0);
  if (launcher_flags.find("127.0.0") == std::string::npos) CHECK(token_files_left(dir).empty());
  std::printf("%s: killed rank 1 after iteration %d; resumed from iteration %d; the first iteration after it logged "
              "%.2f s after the kill\n", name.c_str(), job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(memory);
  fs::remove_all(dir);
  return job;
}

// A stopped rank under --inprocess-soft-timeout 3: found hung by rank 0 (exit 18), killed and replaced.
void recover_from_stop(const std::string& name, const std::string& launcher_flags, const std::vector<std::string>& lines) {
  const fs::path dir = scratch_dir("job_restart", name);
  fs::create_directories(dir);
  const std::string local = " --save-interval 1000 --non-persistent-save-interval 10 --non-persistent-ckpt-type local "
                            "--non-persistent-local-ckpt-dir " + (dir / "local").string() + " --inprocess-restart "
                            "--inprocess-soft-timeout 3";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, launcher_flags, flags(dir / "restarted", local), [] {}, SIGSTOP);
  check_recovered(job, reference, 40, lines);
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  if (launcher_flags.empty()) CHECK(token_files_left(dir).empty());
  std::printf("%s: stopped rank 1 after iteration %d; resumed from iteration %d; the first iteration after it logged "
              "%.2f s after the stop\n", name.c_str(), job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("inprocess-restart: the killed rank is replaced, the other restarts in place, and training carries on") {
  recover_from_kill("in_job", "", " --inprocess-max-iterations 2", 2,
                    {"mactor: rank 1 was killed by signal 9 (Killed); in-job restart 1: starting a new rank 1, "
                     "restarting the others in place", "mactor: rank 0: restarting in place (restart 1 of the job)"});
}

TEST_CASE("inprocess-restart on other hosts: the killed rank is replaced through its agent, the other restarts in place on its supervisor's word") {
  // Both ranks on "other hosts": the launcher can neither signal them nor write their files.
  recover_from_kill("in_job_remote", "-H 127.0.0.2:1,127.0.0.3:1" + agent, " --inprocess-max-iterations 2", 2,
                    {"mactor: rank 1 was killed by signal 9 (Killed); in-job restart 1: starting a new rank 1, "
                     "restarting the others in place", "mactor: rank 0: restarting in place (restart 1 of the job)"});
}

TEST_CASE("inprocess-restart with a spare (mactor --spares 1): the spare takes the killed rank's place and a new spare waits") {
  const auto job = recover_from_kill(
      "in_job_spare", "--spares 1", " --inprocess-max-iterations 2", 3,
      {"mactor: rank 1 was killed by signal 9 (Killed); in-job restart 1: spare 1 takes over rank 1, restarting the "
       "others in place", "mactor: spare 1: taking over rank 1 (restart 1 of the job)",
       "mactor: rank 0: restarting in place (restart 1 of the job)", "mactor: spare 2 (pid"});
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[2]) == 1);  // the spare, now rank 1
}

TEST_CASE("inprocess-restart with a spare on another host (--inprocess-active-world-size 2 of 3 processes) takes over the killed rank") {
  const auto job = recover_from_kill("in_job_remote_spare", "-np 3 -H localhost:2,127.0.0.3:1" + agent,
                                     " --inprocess-active-world-size 2", 3,
                                     {"in-job restart 1: spare 1 takes over rank 1", "mactor: spare 1: taking over rank 1"});
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[2]) == 1);
}

TEST_CASE("inprocess-restart: a stopped rank is found hung, killed and replaced, and training carries on") {
  // Rank 0 names the stopped rank hung and exits 18; the launcher kills the stopped rank and
  // starts both again.
  recover_from_stop("in_job_hang", "",
                    {"mactor: hang:", "exited with status 18; in-job restart 1", "is stopped; killing it to start it again"});
}

TEST_CASE("inprocess-restart on another host: a stopped rank is killed by its supervisor and replaced") {
  recover_from_stop("in_job_remote_hang", "-H localhost:1,127.0.0.3:1" + agent,
                    {"mactor: hang:", "exited with status 18; in-job restart 1",
                     "mactor: rank 1 is stopped and cannot restart in place; killing it to be started again"});
}
