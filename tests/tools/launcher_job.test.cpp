// Job semantics as mpirun's: exit status, teardown on a failed or killed rank, forwarded signals,
// stdin to rank 0, no process left behind, output tagging compared with mpirun's own.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_command.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

std::string rank_exit() { return bin_dir() + "/rank_exit"; }

struct temp_dir {
  std::string path;
  temp_dir() {
    char t[] = "/tmp/mactor_job_XXXXXX";
    path = ::mkdtemp(t);
  }
  ~temp_dir() { fs::remove_all(path); }
};

// Every pid written by rank_exit --pid-dir (ranks and the children they forked).
std::vector<pid_t> pids_in(const std::string& dir) {
  std::vector<pid_t> pids;
  for (auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".pids") continue;
    std::ifstream in(f.path());
    for (pid_t p; in >> p;) pids.push_back(p);
  }
  return pids;
}

bool alive(pid_t p) {
  if (::kill(p, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
  std::string pid, comm, state;
  stat >> pid >> comm >> state;
  return state != "Z";  // a zombie whose parent has not reaped it yet is not running
}

// Starts mactor in the background; waits until all `n` ranks wrote their pid files.
pid_t start_job(const std::vector<std::string>& args, const std::string& pid_dir, int n) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 1000; ++i) {
    int files = 0;
    for (auto& f : fs::directory_iterator(pid_dir)) files += f.path().extension() == ".pids";
    if (files == n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

int wait_status(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

TEST_CASE("a rank's non-zero exit stops the job and becomes mactor's status, naming the rank") {
  auto r = run_shell(mactor_bin() + " -np 4 --oversubscribe " + rank_exit() +
                     " --rank 2 --code 7 --after-ms 200 --sleep-s 30");
  CHECK(r.status == 7);
  CHECK(r.err.find("rank 2 ") != std::string::npos);
  CHECK(r.err.find("exited with status 7") != std::string::npos);
  CHECK(r.seconds < 10);
}

TEST_CASE("a job whose ranks all succeed exits 0") {
  auto r = run_shell(mactor_bin() + " -np 3 --oversubscribe " + rank_exit() + " --code 0");
  CHECK(r.status == 0);
  CHECK(r.err.empty());
}

TEST_CASE("a rank killed with SIGKILL brings the job down in under 10 seconds and leaves nothing") {
  temp_dir d;
  pid_t job = start_job({mactor_bin(), "-np", "4", "--oversubscribe", rank_exit(), "--rank", "none",
                         "--sleep-s", "60", "--pid-dir", d.path}, d.path, 4);
  std::ifstream in(d.path + "/rank1.pids");
  pid_t victim = 0;
  in >> victim;
  REQUIRE(victim > 0);
  auto t0 = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  int status = wait_status(job);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("kill-to-job-down: " << seconds * 1000 << " ms");
  CHECK(status == 137);
  CHECK(seconds < 10);
  for (pid_t p : pids_in(d.path)) CHECK_FALSE(alive(p));
}

TEST_CASE("a job whose rank 0 was killed leaves no inspector token file behind") {
  // Rank 0 writes its default token file, as the coordinator does, then dies by SIGKILL before it
  // could remove it; another job's file stays.
  temp_dir home;
  const fs::path tokens = fs::path(home.path) / ".mactor/inspector";
  fs::create_directories(tokens);
  std::ofstream(tokens / "0123456789-abc.token") << "another job's\n";
  const auto r = run_shell("HOME=" + home.path + " " + mactor_bin() +
                           " -np 2 --oversubscribe sh -c 'if [ $MACTOR_RANK = 0 ]; then echo t > "
                           "$HOME/.mactor/inspector/$MACTOR_JOB_ID.token; ls $HOME/.mactor/inspector; kill -9 $$; "
                           "fi; sleep 30'");
  CHECK(r.status == 137);
  CHECK(r.out.find(".token") != std::string::npos);  // it was there while the job ran
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tokens)) left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"0123456789-abc.token"});
}

TEST_CASE("mactor's stderr names the rank killed by a signal") {
  auto r = run_shell(mactor_bin() + " -np 3 --oversubscribe " + rank_exit() +
                     " --rank 1 --signal 9 --after-ms 100 --sleep-s 30");
  CHECK(r.status == 137);
  CHECK(r.err.find("rank 1 ") != std::string::npos);
  CHECK(r.err.find("killed by signal 9") != std::string::npos);
  CHECK(r.seconds < 10);
}

TEST_CASE("ranks that ignore SIGTERM are killed after the grace period") {
  auto r = run_shell(mactor_bin() + " -np 3 --oversubscribe --kill-grace 0.5 " + rank_exit() +
                     " --rank 0 --code 3 --after-ms 200 --ignore-term --sleep-s 30");
  CHECK(r.status == 3);
  CHECK(r.err.find("ignored SIGTERM") != std::string::npos);
  CHECK(r.seconds < 5);
}

TEST_CASE("SIGTERM to mactor is forwarded to every rank and no process survives") {
  temp_dir d;
  pid_t job = start_job({mactor_bin(), "-np", "3", "--oversubscribe", rank_exit(), "--rank", "none",
                         "--sleep-s", "60", "--pid-dir", d.path}, d.path, 3);
  ::kill(job, SIGTERM);
  CHECK(wait_status(job) == 128 + SIGTERM);
  auto pids = pids_in(d.path);
  CHECK(pids.size() == 6);
  for (pid_t p : pids) CHECK_FALSE(alive(p));
}

TEST_CASE("Ctrl-C (SIGINT) to mactor reaches every rank and mactor exits 130") {
  temp_dir d;
  pid_t job = start_job({mactor_bin(), "-np", "2", rank_exit(), "--rank", "none", "--sleep-s", "60",
                         "--pid-dir", d.path}, d.path, 2);
  auto t0 = std::chrono::steady_clock::now();
  ::kill(job, SIGINT);
  CHECK(wait_status(job) == 130);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));  // no grace wait needed
  for (pid_t p : pids_in(d.path)) CHECK_FALSE(alive(p));
}

TEST_CASE("SIGKILL of mactor itself takes its ranks down through the parent-death signal") {
  temp_dir d;
  // Short sleeps: the ranks' own children have no death signal and outlive mactor by design.
  pid_t job = start_job({mactor_bin(), "-np", "2", rank_exit(), "--rank", "none", "--sleep-s", "3",
                         "--pid-dir", d.path}, d.path, 2);
  ::kill(job, SIGKILL);
  wait_status(job);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::ifstream in0(d.path + "/rank0.pids"), in1(d.path + "/rank1.pids");
  pid_t r0 = 0, r1 = 0;
  in0 >> r0;
  in1 >> r1;
  CHECK_FALSE(alive(r0));
  CHECK_FALSE(alive(r1));
}

TEST_CASE("a child that a rank moved to its own session does not outlive the job") {
  temp_dir d;
  auto r = run_shell(mactor_bin() + " -np 2 " + rank_exit() + " --code 0 --setsid-child --pid-dir " + d.path);
  CHECK(r.status == 0);
  auto pids = pids_in(d.path);
  CHECK(pids.size() == 4);
  for (pid_t p : pids) CHECK_FALSE(alive(p));
}

TEST_CASE("stdin goes to rank 0 only") {
  auto r = run_shell(mactor_bin() + " -np 2 sh -c 'read x; echo \"$MACTOR_RANK:$x\"'", "hello\n");
  CHECK(r.status == 0);
  auto lines = lines_of(r.out);
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{"0:hello", "1:"});
}

TEST_CASE("stdin reaches rank 0 when it runs on a remote host") {
  auto r = run_shell(mactor_bin() + " -H a:1,b:1 --launch-agent " + MACTOR_SOURCE_DIR +
                     "/tests/tools/fake_agent.sh sh -c 'read x; echo \"$MACTOR_RANK:$x\"'", "remote\n");
  CHECK(r.status == 0);
  auto lines = lines_of(r.out);
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{"0:remote", "1:"});
}

TEST_CASE("tagged output (--tag-output) prefixes lines exactly as mpirun does") {
  std::string prog = " sh -c 'echo out $OMPI_COMM_WORLD_RANK; echo err >&2'";
  auto ours = run_shell(mactor_bin() + " -np 2 --tag-output" + prog + " 2>&1");
  auto ompi = run_shell("mpirun --allow-run-as-root -np 2 --tag-output" + prog + " 2>&1");
  REQUIRE(ours.status == 0);
  auto a = lines_of(ours.out), b = lines_of(ompi.out);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  CHECK(a == b);
  CHECK(a.size() == 4);
}

TEST_CASE("output files (--output-filename) are the same as mpirun's") {
  temp_dir ours, ompi;
  std::string prog = " sh -c 'echo out $OMPI_COMM_WORLD_RANK; echo err >&2'";
  REQUIRE(run_shell(mactor_bin() + " -np 2 --output-filename " + ours.path + prog).status == 0);
  REQUIRE(run_shell("mpirun --allow-run-as-root -np 2 --output-filename " + ompi.path + prog).status == 0);
  for (const char* f : {"1/rank.0/stdout", "1/rank.0/stderr", "1/rank.1/stdout", "1/rank.1/stderr"}) {
    INFO(f);
    CHECK(fs::exists(ours.path + "/" + f));
    CHECK(slurp(ours.path + "/" + f) == slurp(ompi.path + "/" + f));
  }
}

TEST_CASE("timestamped output (--timestamp-output) puts the time before each line") {
  auto r = run_shell(mactor_bin() + " -np 1 --timestamp-output echo hi");
  REQUIRE(r.status == 0);
  // ctime's form, as mpirun prints it: "Wed Dec  2 18:55:42 2026hi"
  CHECK(r.out.size() == 24 + 3);
  CHECK(r.out.substr(24) == "hi\n");
}

TEST_CASE("a job past --timeout is stopped with status 124") {
  auto r = run_shell(mactor_bin() + " -np 2 --timeout 0.5 " + rank_exit() + " --rank none --sleep-s 30");
  CHECK(r.status == 124);
  CHECK(r.err.find("--timeout") != std::string::npos);
  CHECK(r.seconds < 5);
}

TEST_CASE("a rank that never reaches the store makes the others fail naming it") {
  auto r = run_shell(mactor_bin() + " -np 3 --oversubscribe " + bin_dir() +
                     "/rank_kv --absent 2 --timeout-ms 800");
  CHECK(r.status == 3);
  CHECK(r.err.find("rank 2 never arrived") != std::string::npos);
}

TEST_CASE("local ranks exchange data through the store and over a socket") {
  auto r = run_shell(mactor_bin() + " -np 3 --oversubscribe " + bin_dir() + "/rank_kv");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("rank 0 got 'hello from rank 1") != std::string::npos);
  CHECK(r.out.find("rank 2 got 'echo hello from rank 2") != std::string::npos);
}

TEST_CASE("bad command lines exit 2 and name the option") {
  struct bad {
    const char* args;
    const char* says;
  } cases[] = {
      {"-np 0 true", "-np 0"},
      {"--bind-to socket true", "--bind-to socket"},
      {"--frobnicate true", "--frobnicate"},
      {"-np 2", "no program"},
      {"-np 64 true", "not enough slots"},
      {"-H a:x true", "slot count 'x'"},
      {"--map-by ppr:2:socket true", "ppr:N:node"},
      {"-np 1 no_such_program_here", "no_such_program_here"},
      {"-np 1 true --inprocess-restart --inprocess-max-iterations -1", "--inprocess-max-iterations -1"},
      {"-np 1 true --inprocess-restart --inprocess-hard-timeout soon", "--inprocess-hard-timeout soon"},
      {"-np 1 --device-memory lots true", "--device-memory lots"},
      {"-np 2 --oversubscribe --spares 1 true", "add --inprocess-restart to the program's flags"},
      {"--spares 1 true --inprocess-restart", "--spares needs -np"},
      {"-np 2 --oversubscribe true --inprocess-restart --inprocess-active-world-size 3", "exceeds the 2 processes"},
      {"-np 3 --oversubscribe --spares 1 true --inprocess-restart --inprocess-active-world-size 1", "give one of the two"},
  };
  for (auto& c : cases) {
    INFO(c.args);
    auto r = run_shell(mactor_bin() + " " + c.args);
    CHECK(r.status == 2);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

TEST_CASE("mactor --device-memory reaches every rank as MACTOR_DEVICE_MEMORY") {
  const auto r = run_shell(mactor_bin() + " -np 2 --oversubscribe --device-memory 512M sh -c 'echo $MACTOR_RANK:$MACTOR_DEVICE_MEMORY'");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("0:512M") != std::string::npos);
  CHECK(r.out.find("1:512M") != std::string::npos);
}

TEST_CASE("mactor --help lists the mpirun options") {
  auto r = run_shell(mactor_bin() + " --help");
  CHECK(r.status == 0);
  for (const char* opt : {"-np", "--host", "--hostfile", "--npernode", "--map-by", "--bind-to",
                          "--oversubscribe", "-x VAR", "--tag-output", "--timestamp-output",
                          "--output-filename", "--timeout", "--launch-agent", " : "})
    CHECK(r.out.find(opt) != std::string::npos);
}

TEST_CASE("max-restarts starts a failed job again up to N times, and not after a user error") {
  // A rank that fails each time: two restarts, then mactor exits with its status.
  auto r = run_shell(mactor_bin() + " -np 2 --oversubscribe --max-restarts 2 " + rank_exit() +
                     " --rank 1 --code 3 --after-ms 50 --sleep-s 30");
  CHECK(r.status == 3);
  CHECK(r.err.find("starting it again (restart 1 of 2)") != std::string::npos);
  CHECK(r.err.find("starting it again (restart 2 of 2)") != std::string::npos);
  CHECK(r.err.find("restart 3") == std::string::npos);
  // Exit status 2 (a bad command line or bad data) and 17 (failed result validation) are not retried.
  for (int code : {2, 17}) {
    r = run_shell(mactor_bin() + " -np 2 --oversubscribe --max-restarts 2 " + rank_exit() + " --rank 0 --code " +
                  std::to_string(code) + " --after-ms 50 --sleep-s 30");
    CHECK(r.status == code);
    CHECK(r.err.find("starting it again") == std::string::npos);
  }
  // Each start tells the ranks its number, as torchrun does.
  r = run_shell(mactor_bin() + " -np 1 --max-restarts 1 sh -c 'echo start $MACTOR_RESTART_COUNT "
                "$TORCHELASTIC_RESTART_COUNT; exit 5'");
  CHECK(r.status == 5);
  CHECK(r.out.find("start 0 0") != std::string::npos);
  CHECK(r.out.find("start 1 1") != std::string::npos);
}
