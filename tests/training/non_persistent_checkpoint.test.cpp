// Non-persistent global checkpoints (--non-persistent-save-interval, --non-persistent-ckpt-type
// global, --non-persistent-global-ckpt-dir), launched with `mactor`: where they go, which survive,
// which a resume takes (Megatron's checkpoint_and_decide_exit, cleanup_old_non_persistent_checkpoint
// and _load_base_checkpoint), and that a resumed run equals the uninterrupted one bit for bit.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace mactor::test;
using namespace std::chrono_literals;

namespace {

std::string model_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr-decay-iters 6 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --tokenizer-type "
         "NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 --log-interval 1 --eval-iters 0 --seed 11 "
         "--use-distributed-optimizer";
}

// Persistent every 4, non-persistent every iteration.
const std::string non_persistent = " --save-interval 4 --non-persistent-save-interval 1 --non-persistent-ckpt-type global";

fs::path scratch(const std::string& name) { return scratch_dir("non_persistent_checkpoints", name); }

std::vector<std::int64_t> iterations_in(const fs::path& dir) {
  std::vector<std::int64_t> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.rfind("iter_", 0) == 0 && name.find('.') == std::string::npos) out.push_back(std::stoll(name.substr(5)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("non-persistent global checkpoints: only the newest kept, a resume takes the newest and continues exactly") {
  const auto full_dir = scratch("full"), dir = scratch("run");
  const auto full = launch(2, model_flags() + " --save " + full_dir.string() + " --save-interval 100");
  // Exits at 3: iteration 3's non-persistent save spares the exit's persistent one (Megatron's saved_checkpoint).
  const auto first = launch(2, model_flags() + " --save " + dir.string() + non_persistent + " --exit-interval 3");
  CHECK(first.out.find("saving checkpoint at iteration       3 to " + (dir / "non_persistent").string()) != std::string::npos);
  CHECK(first.out.find("removed non-persistent checkpoint from iteration       1") != std::string::npos);
  CHECK_FALSE(mactor::checkpoint::read_tracker(dir.string()));
  CHECK(iterations_in(dir / "non_persistent") == std::vector<std::int64_t>{2, 3});  // the one before stays until 3 is in
  REQUIRE(mactor::checkpoint::read_tracker((dir / "non_persistent").string()) == 3);

  const auto resumed = launch(2, model_flags() + " --load " + dir.string() + " --save " + dir.string() + non_persistent);
  const auto want = iteration_lines(full.out), got = iteration_lines(resumed.out);
  REQUIRE(got.size() == 3);
  REQUIRE(got.begin()->first == 4);
  CHECK(resumed.out.find("Loading from a non-persistent checkpoint (non-persistent iter 3)") != std::string::npos);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));
  }
  // The persistent checkpoints (4, and the end of training's 6) are untouched by the clean-ups.
  CHECK(iterations_in(dir) == std::vector<std::int64_t>{4, 6});
  CHECK(iterations_in(dir / "non_persistent") == std::vector<std::int64_t>{5, 6});
  mactor::checkpoint::checkpoint_reader(dir.string(), 4).verify_all();
}

TEST_CASE("non-persistent global checkpoints: a newer persistent one wins and --non-persistent-global-ckpt-dir places them") {
  SECTION("a persistent checkpoint newer than the non-persistent one is loaded instead") {
    const auto other = scratch("persistent_newer");
    launch(2, model_flags() + " --save " + other.string() + " --save-interval 2 --non-persistent-save-interval 3 "
                              "--non-persistent-ckpt-type global --exit-interval 4");
    REQUIRE(mactor::checkpoint::read_tracker((other / "non_persistent").string()) == 3);
    const auto r = launch(2, model_flags() + " --load " + other.string() + " --non-persistent-ckpt-type global");
    CHECK(iteration_lines(r.out).begin()->first == 5);
  }
  SECTION("--non-persistent-global-ckpt-dir, in the torch format: saved and loaded there") {
    const auto other = scratch("global_dir"), global = scratch("global_dir_np");
    const std::string flags =
        model_flags() + non_persistent + " --ckpt-format torch --non-persistent-global-ckpt-dir " + global.string();
    launch(2, flags + " --save " + other.string() + " --exit-interval 3");
    CHECK(mactor::checkpoint::read_tracker(global.string()) == 3);
    CHECK_FALSE(fs::exists(other / "non_persistent"));
    CHECK(fs::exists(global / "iter_0000003/mp_rank_00/distrib_optim.pt"));
    const auto r = launch(2, flags + " --load " + other.string() + " --save " + other.string());
    CHECK(iteration_lines(r.out).begin()->first == 4);
    CHECK(r.out.find(" loading checkpoint from " + other.string() + " at iteration 3") != std::string::npos);
  }
}

TEST_CASE("a job killed during a non-persistent save resumes from the previous non-persistent checkpoint") {
  const auto dir = scratch("killed");
  const fs::path log = dir.string() + ".log";
  // Every save waits 1.5 s before writing (a test hook), so the kill lands inside the third one.
  const std::string command = "MACTOR_TEST_CHECKPOINT_WRITE_DELAY_MS=1500 exec " +
                              launch_command(2, model_flags() + " --save " + dir.string() + non_persistent) + " > " +
                              log.string() + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own process group: the launcher and both ranks die together
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool third_save_started = false;
  while (!third_save_started && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    third_save_started = slurp(log.string()).find("saving checkpoint at iteration       3") != std::string::npos;
  }
  std::this_thread::sleep_for(300ms);  // inside the 1.5 s before the third save's first byte
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(slurp(log.string()));
  REQUIRE(third_save_started);
  const auto np = (dir / "non_persistent").string();
  REQUIRE(mactor::checkpoint::read_tracker(np) == 2);
  CHECK(iterations_in(np) == std::vector<std::int64_t>{2});  // 1 removed before 3 began; 3 never committed
  mactor::checkpoint::checkpoint_reader(np, 2).verify_all();
  const auto resumed = launch(2, model_flags() + " --load " + dir.string() + " --save " + dir.string() + non_persistent);
  CHECK(iteration_lines(resumed.out).begin()->first == 3);
}
