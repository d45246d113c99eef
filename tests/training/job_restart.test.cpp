// mactor --max-restarts: a rank killed with SIGKILL mid-training, the job started again by the
// launcher, resumed from its newest checkpoint (a persistent one on disk, or a replicated local one
// in memory whose owner's copy died with it), and its losses from there on equal to an
// uninterrupted run's, bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "checkpoint/local_checkpoint.hpp"
#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace mactor::test;

namespace {

// The whole of a rank's or the launcher's output file.
std::string slurp(const fs::path& p) { return mactor::test::slurp(p.string()); }

std::string flags(const fs::path& checkpoints, const std::string& saves) {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 300 --lr 1e-2 "
         "--min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 10 --init-method-std 0.1 --mock-data "
         "--tokenizer-type NullTokenizer --vocab-size 8191 --log-interval 1 --eval-iters 0 --seed 5 "
         "--save " + checkpoints.string() + " --load " + checkpoints.string() + saves;
}

// Each iteration's last logged "lm loss" text (a restarted job logs the iterations after its
// checkpoint again).
std::map<int, std::string> losses_by_iteration(const std::string& log) {
  std::map<int, std::string> out;
  static const std::regex line(R"(iteration +(\d+)/ +\d+ \|.*?\| lm loss: ([-+0-9.eE]+) \|)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1].str())] = (*it)[2].str();
  return out;
}

// The processes whose parent is `parent` (the launcher's ranks).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) kids.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return kids;
}

// The launcher's ranks: its children, or for a rank on another host (through an agent that
// execs `mactor --remote-exec`) the supervisor's child.
std::vector<pid_t> rank_processes(pid_t launcher) {
  std::vector<pid_t> ranks;
  for (pid_t p : children_of(launcher)) {
    std::ifstream comm("/proc/" + std::to_string(p) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name != "mactor") {
      ranks.push_back(p);
      continue;
    }
    for (pid_t rank : children_of(p)) ranks.push_back(rank);
  }
  return ranks;
}

// What a killed and restarted job did.
struct restarted_job {
  int status = -1, killed_after = 0, resumed_from = -1;
  std::vector<pid_t> ranks_before, ranks_after;  // the launcher's children before the kill and once recovered
  double recovered_s = -1;  // from the kill to the restarted job's first iteration line
  std::string out, err;
};

// Runs `flags` on 2 ranks under mactor with `launcher_flags`, sends rank 1 `sig` (SIGKILL) once
// iteration 45 is logged (then calls `after_kill`), and waits for the job's end. `processes`: the
// launcher's, spares included (-np is 2 unless the launcher flags say otherwise).
restarted_job kill_and_restart(const fs::path& dir, const std::string& launcher_flags, const std::string& job_flags,
                               const std::function<void()>& after_kill, int sig = SIGKILL, std::size_t processes = 2) {
  restarted_job job;
  const pid_t launcher = fork();
  if (launcher == 0) {
    freopen((dir / "out.txt").c_str(), "w", stdout);
    freopen((dir / "err.txt").c_str(), "w", stderr);
    // Its own home: the inspector's token files land in <dir>/home/.mactor/inspector.
    setenv("HOME", (dir / "home").c_str(), 1);
    const std::string np = launcher_flags.find("-np ") == std::string::npos ? " -np 2" : "";
    const std::string line = mactor_bin() + np + " --oversubscribe " + launcher_flags + " " + bin_dir() + "/pretrain_gpt " + job_flags;
    execl("/bin/sh", "sh", "-c", ("exec " + line).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (losses_by_iteration(slurp(dir / "out.txt")).count(45) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const auto before = losses_by_iteration(slurp(dir / "out.txt"));
  REQUIRE(before.count(45) == 1);
  REQUIRE(before.count(300) == 0);  // still training
  job.killed_after = before.rbegin()->first;
  const auto ranks = rank_processes(launcher);
  REQUIRE(ranks.size() == processes);
  job.ranks_before = ranks;
  REQUIRE(kill(ranks[1], sig) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const std::size_t logged_before = slurp(dir / "out.txt").size();
  after_kill();
  while (job.recovered_s < 0 && std::chrono::steady_clock::now() < killed_at + 120s) {
    const auto out = slurp(dir / "out.txt");
    if (out.find("successfully loaded checkpoint", logged_before) != std::string::npos &&
        std::regex_search(out.substr(logged_before), std::regex(R"(iteration +\d+/ +300 \|)"))) {
      job.recovered_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
      job.ranks_after = rank_processes(launcher);
    }
    std::this_thread::sleep_for(10ms);
  }
  int status = 0;
  REQUIRE(waitpid(launcher, &status, 0) == launcher);
  REQUIRE(WIFEXITED(status));
  job.status = WEXITSTATUS(status);
  job.out = slurp(dir / "out.txt");
  job.err = slurp(dir / "err.txt");
  static const std::regex resumed(R"(successfully loaded checkpoint from .* at iteration (\d+))");
  std::smatch m;
  if (std::regex_search(job.out, m, resumed)) job.resumed_from = std::stoi(m[1].str());
  return job;
}

// The restarted job ended well, resumed from `at_least` or later, and logged every loss as the
// uninterrupted run did.
void check_recovered(const restarted_job& job, const std::map<int, std::string>& reference, int at_least,
                     const std::vector<std::string>& launcher_lines) {
  INFO("stderr:\n" << job.err.substr(job.err.size() > 4000 ? job.err.size() - 4000 : 0));
  CHECK(job.status == 0);
  for (const auto& line : launcher_lines) {
    INFO(line);
    CHECK(job.err.find(line) != std::string::npos);
  }
  REQUIRE(job.resumed_from >= at_least);
  const auto after = losses_by_iteration(job.out);
  REQUIRE(after.size() == 300);
  for (int i = 1; i <= 300; ++i) {
    INFO("iteration " << i << " (resumed after " << job.resumed_from << ")");
    CHECK(after.at(i) == reference.at(i));
  }
}

// The inspector token files a job left in its home (kill_and_restart's <dir>/home): none once it
// ended, a rank restarted in place included (its image is replaced without its exit path).
std::vector<std::string> token_files_left(const fs::path& dir) {
  std::vector<std::string> left;
  const fs::path tokens = dir / "home/.mactor/inspector";
  if (fs::exists(tokens))
    for (const auto& e : fs::directory_iterator(tokens)) left.push_back(e.path().filename().string());
  return left;
}

// A fresh folder in the node's memory (tmpfs, as a node's /dev/shm), for local checkpoints.
fs::path node_memory(const fs::path& dir, const std::string& name) {
  const fs::path memory = fs::exists("/dev/shm") ? fs::path("/dev/shm") / ("mactor_" + name + "_" + std::to_string(getpid()))
                                                 : dir / "local";
  fs::remove_all(memory);
  return memory;
}

// Local checkpoints every 10 iterations in `memory`, each copied to the other rank (--replication).
std::string replicated_in_memory(const fs::path& memory) {
  return " --save-interval 1000 --non-persistent-save-interval 10 --non-persistent-ckpt-type local "
         "--non-persistent-local-ckpt-dir " + memory.string() + " --replication --replication-jump 1";
}

const std::vector<std::string> whole_job_restart = {"mactor: the job failed (exit status",
                                                     "starting it again (restart 1 of 1)"};

}  // namespace

TEST_CASE("mactor max-restarts starts a job again after a rank is killed and it resumes from its checkpoint") {
  const fs::path dir = scratch_dir("job_restart", "kill");
  fs::create_directories(dir);
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 20")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, "--max-restarts 1", flags(dir / "restarted", " --save-interval 20"), [] {});
  check_recovered(job, reference, 40, whole_job_restart);
  std::printf("disk checkpoints: killed a rank after iteration %d; restarted from the checkpoint of iteration %d; the "
              "first iteration after it logged %.2f s after the kill\n", job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(dir);
}

TEST_CASE("mactor max-restarts: the killed rank's memory is gone and it resumes from its peer's replica") {
  const fs::path dir = scratch_dir("job_restart", "replica");
  fs::create_directories(dir);
  // The local checkpoints live in memory (tmpfs), as on a node's /dev/shm; rank 1's vanish with it.
  const fs::path memory = node_memory(dir, "replica");
  const std::string local = replicated_in_memory(memory);
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, "--max-restarts 1", flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); });
  CHECK(job.out.find("rank 1: restored its local checkpoint of iteration " + std::to_string(job.resumed_from) +
                     " from rank 0's replica") != std::string::npos);
  check_recovered(job, reference, 40, whole_job_restart);
  std::printf("replicated memory checkpoints: killed a rank after iteration %d; restarted from the replica of iteration %d; "
              "the first iteration after it logged %.2f s after the kill\n", job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(memory);
  fs::remove_all(dir);
}

TEST_CASE("inprocess-restart: the killed rank is replaced, the other restarts in place, and training carries on") {
  const fs::path dir = scratch_dir("job_restart", "in_job");
  fs::create_directories(dir);
  const fs::path memory = node_memory(dir, "in_job");
  const std::string local = replicated_in_memory(memory) + " --inprocess-restart --inprocess-max-iterations 2";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  // No --max-restarts: the job must mend itself without starting again.
  const auto job = kill_and_restart(dir, "", flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); });
  check_recovered(job, reference, 40,
                  {"mactor: rank 1 was killed by signal 9 (Killed); in-job restart 1: starting a new rank 1, restarting "
                   "the others in place", "mactor: rank 0: restarting in place (restart 1 of the job)"});
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  CHECK(job.out.find("rank 1: restored its local checkpoint of iteration " + std::to_string(job.resumed_from) +
                     " from rank 0's replica") != std::string::npos);
  // Rank 0 is the same process as before; rank 1 is a new one.
  REQUIRE(job.ranks_after.size() == 2);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[0]) == 1);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[1]) == 0);
  CHECK(token_files_left(dir).empty());
  std::printf("in-job restart: killed a rank after iteration %d; rank 0 restarted in place, rank 1 replaced, both from "
              "iteration %d; the first iteration after it logged %.2f s after the kill\n", job.killed_after,
              job.resumed_from, job.recovered_s);
  fs::remove_all(memory);
  fs::remove_all(dir);
}

TEST_CASE("inprocess-restart on other hosts: the killed rank is replaced through its agent, the other restarts in place on its supervisor's word") {
  const fs::path dir = scratch_dir("job_restart", "in_job_remote");
  fs::create_directories(dir);
  const fs::path memory = node_memory(dir, "in_job_remote");
  const std::string local = replicated_in_memory(memory) + " --inprocess-restart --inprocess-max-iterations 2";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  // Both ranks on "other hosts" (loopback addresses that are not this host's own), reached
  // through the test agent: the launcher can neither signal them nor write their files.
  const std::string hosts = "-H 127.0.0.2:1,127.0.0.3:1 --launch-agent " + std::string(MACTOR_SOURCE_DIR) +
                            "/tests/tools/fake_agent.sh";
  const auto job = kill_and_restart(dir, hosts, flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); });
  check_recovered(job, reference, 40,
                  {"mactor: rank 1 was killed by signal 9 (Killed); in-job restart 1: starting a new rank 1, restarting "
                   "the others in place", "mactor: rank 0: restarting in place (restart 1 of the job)"});
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  CHECK(job.out.find("rank 1: restored its local checkpoint of iteration " + std::to_string(job.resumed_from) +
                     " from rank 0's replica") != std::string::npos);
  REQUIRE(job.ranks_after.size() == 2);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[0]) == 1);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[1]) == 0);
  std::printf("in-job restart on other hosts: killed a rank after iteration %d; rank 0 restarted in place, rank 1 "
              "replaced, both from iteration %d; the first iteration after it logged %.2f s after the kill\n",
              job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(memory);
  fs::remove_all(dir);
}

TEST_CASE("inprocess-restart on another host: a stopped rank is killed by its supervisor and replaced") {
  const fs::path dir = scratch_dir("job_restart", "in_job_remote_hang");
  fs::create_directories(dir);
  const fs::path memory = dir / "local";
  const std::string local = " --save-interval 1000 --non-persistent-save-interval 10 --non-persistent-ckpt-type local "
                            "--non-persistent-local-ckpt-dir " + memory.string() + " --inprocess-restart "
                            "--inprocess-soft-timeout 3";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const std::string hosts = "-H localhost:1,127.0.0.3:1 --launch-agent " + std::string(MACTOR_SOURCE_DIR) +
                            "/tests/tools/fake_agent.sh";
  const auto job = kill_and_restart(dir, hosts, flags(dir / "restarted", local), [] {}, SIGSTOP);
  check_recovered(job, reference, 40,
                  {"mactor: hang:", "exited with status 18; in-job restart 1",
                   "mactor: rank 1 is stopped and cannot restart in place; killing it to be started again"});
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("inprocess-restart with a spare (mactor --spares 1): the spare takes the killed rank's place and a new spare waits") {
  const fs::path dir = scratch_dir("job_restart", "in_job_spare");
  fs::create_directories(dir);
  const fs::path memory = node_memory(dir, "in_job_spare");
  const std::string local = replicated_in_memory(memory) + " --inprocess-restart --inprocess-max-iterations 2";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, "--spares 1", flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); },
                                    SIGKILL, 3);
  check_recovered(job, reference, 40,
                  {"mactor: rank 1 was killed by signal 9 (Killed); in-job restart 1: spare 1 takes over rank 1, "
                   "restarting the others in place", "mactor: spare 1: taking over rank 1 (restart 1 of the job)",
                   "mactor: rank 0: restarting in place (restart 1 of the job)", "mactor: spare 2 (pid"});
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  CHECK(job.out.find("rank 1: restored its local checkpoint of iteration " + std::to_string(job.resumed_from) +
                     " from rank 0's replica") != std::string::npos);
  // Rank 0 and the spare are the processes they were; the killed one is gone and a new spare waits.
  REQUIRE(job.ranks_before.size() == 3);
  REQUIRE(job.ranks_after.size() == 3);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[0]) == 1);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[1]) == 0);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[2]) == 1);
  std::printf("in-job restart with a spare: killed a rank after iteration %d; the spare took its place, both from "
              "iteration %d; the first iteration after it logged %.2f s after the kill\n", job.killed_after,
              job.resumed_from, job.recovered_s);
  fs::remove_all(memory);
  fs::remove_all(dir);
}

TEST_CASE("inprocess-restart with a spare on another host (--inprocess-active-world-size 2 of 3 processes) takes over the killed rank") {
  const fs::path dir = scratch_dir("job_restart", "in_job_remote_spare");
  fs::create_directories(dir);
  const fs::path memory = node_memory(dir, "in_job_remote_spare");
  const std::string local = replicated_in_memory(memory) + " --inprocess-restart --inprocess-active-world-size 2";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const std::string hosts = "-np 3 -H localhost:2,127.0.0.3:1 --launch-agent " + std::string(MACTOR_SOURCE_DIR) +
                            "/tests/tools/fake_agent.sh";
  const auto job = kill_and_restart(dir, hosts, flags(dir / "restarted", local),
                                    [&] { fs::remove_all(mactor::checkpoint::local_rank_dir(memory.string(), 1)); },
                                    SIGKILL, 3);
  check_recovered(job, reference, 40,
                  {"in-job restart 1: spare 1 takes over rank 1", "mactor: spare 1: taking over rank 1"});
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  REQUIRE(job.ranks_after.size() == 3);
  CHECK(std::count(job.ranks_after.begin(), job.ranks_after.end(), job.ranks_before[2]) == 1);  // the spare, now rank 1
  fs::remove_all(memory);
  fs::remove_all(dir);
}

TEST_CASE("inprocess-restart: a stopped rank is found hung, killed and replaced, and training carries on") {
  const fs::path dir = scratch_dir("job_restart", "in_job_hang");
  fs::create_directories(dir);
  const fs::path memory = dir / "local";
  const std::string local = " --save-interval 1000 --non-persistent-save-interval 10 --non-persistent-ckpt-type local "
                            "--non-persistent-local-ckpt-dir " + memory.string() + " --inprocess-restart "
                            "--inprocess-soft-timeout 3";
  const auto reference = losses_by_iteration(launch(2, flags(dir / "reference", " --save-interval 1000")).out);
  REQUIRE(reference.size() == 300);
  const auto job = kill_and_restart(dir, "", flags(dir / "restarted", local), [] {}, SIGSTOP);
  // Rank 0 names the stopped rank hung and exits 18; the launcher kills the stopped rank and
  // starts both again.
  check_recovered(job, reference, 40,
                  {"mactor: hang:", "exited with status 18; in-job restart 1", "is stopped; killing it to start it again"});
  CHECK(job.err.find("mactor: the job failed") == std::string::npos);
  CHECK(token_files_left(dir).empty());
  std::printf("in-job restart of a hang: stopped a rank after iteration %d; resumed from iteration %d; the first "
              "iteration after it logged %.2f s after the stop\n", job.killed_after, job.resumed_from, job.recovered_s);
  fs::remove_all(dir);
}
