// Kill during save: a child process saving a 200 MB iteration 2 over iteration 1 is SIGKILLed
// mid-write (and, separately, while rank 0 waits to commit); iteration 1 must stay the tracked,
// loadable, verified checkpoint, and a later save of iteration 2 must succeed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <thread>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/save.hpp"
#include "checkpoint_test_util.hpp"

namespace ck = mactor::checkpoint;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t big_rows = 50 * 1024, big_cols = 1024;  // 200 MiB of fp32

ck::rank_state big_state(float base) {
  ck::rank_state s;
  std::vector<float> data(std::size_t(big_rows * big_cols));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = base + float(i % 4099);
  s.pieces.push_back(ck::whole_tensor("big", {big_rows, big_cols}, std::move(data)));
  s.pieces.push_back(ck::whole_tensor("step", {}, {base}));
  s.common = nlohmann::json{{"iteration", int(base)}};
  return s;
}

// Forks a child that runs save(); SIGKILLs it as soon as ready(dir) holds. Returns whether the
// kill landed before the child finished on its own.
template <typename Ready>
bool kill_child_during_save(const fs::path& dir, int world_size, ck::rank_state state, Ready ready) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      ck::save(dir.string(), 2, 0, world_size, std::move(state));
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ready() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

void expect_iteration_1_intact(const fs::path& dir) {
  REQUIRE(ck::read_tracker(dir.string()) == 1);
  ck::checkpoint_reader reader(dir.string());
  CHECK(reader.iteration() == 1);
  reader.verify_all();
  CHECK(reader.read_whole("step") == std::vector<float>{1.0f});
  const auto big = reader.read_whole("big");
  CHECK(big[12345] == 1.0f + float(12345 % 4099));
  CHECK(big.back() == 1.0f + float((big.size() - 1) % 4099));
}

}  // namespace

TEST_CASE("SIGKILL in the middle of writing a shard leaves the previous checkpoint tracked and loadable") {
  const auto dir = ck::test::scratch_dir("kill-write");
  ck::save(dir.string(), 1, 0, 1, big_state(1.0f));
  const auto shard = ck::temporary_iteration_dir(dir, 2, "") / ck::shard_file_name(0);
  const bool killed = kill_child_during_save(dir, 1, big_state(2.0f), [&] {
    std::error_code ec;
    const auto size = fs::file_size(shard, ec);
    return !ec && size >= (std::uintmax_t(32) << 20);
  });
  REQUIRE(killed);
  const auto partial = fs::file_size(shard);
  INFO("the child was killed after writing " << partial << " bytes");
  CHECK(partial < std::uintmax_t(big_rows * big_cols * 4));
  CHECK_FALSE(fs::exists(dir / "iter_0000002"));
  expect_iteration_1_intact(dir);
  ck::save(dir.string(), 2, 0, 1, big_state(2.0f));  // over the leftovers of the killed attempt
  CHECK(ck::read_tracker(dir.string()) == 2);
  ck::checkpoint_reader reader(dir.string());
  reader.verify_all();
  CHECK(reader.read_whole("step") == std::vector<float>{2.0f});
  CHECK(ck::checkpoint_reader(dir.string(), 1).read_whole("step") == std::vector<float>{1.0f});
}

TEST_CASE("SIGKILL while rank 0 waits to commit leaves the previous checkpoint tracked and loadable") {
  const auto dir = ck::test::scratch_dir("kill-commit");
  ck::save(dir.string(), 1, 0, 1, big_state(1.0f));
  const auto marker = ck::temporary_iteration_dir(dir, 2, "") / ck::done_marker_name(0);
  ck::rank_state small;
  small.pieces.push_back(ck::whole_tensor("step", {}, {2.0f}));
  small.common = nlohmann::json::object();
  // World size 2 with no rank 1: the child finishes its shard, then waits for rank 1 forever.
  REQUIRE(kill_child_during_save(dir, 2, std::move(small), [&] { return fs::exists(marker); }));
  CHECK_FALSE(fs::exists(dir / "iter_0000002"));
  expect_iteration_1_intact(dir);
  CHECK(ck::remove_interrupted_saves(dir.string()) == 1);
  expect_iteration_1_intact(dir);
}

TEST_CASE("ranks in separate processes meet through the filesystem and rank 0 commits their shards") {
  const auto dir = ck::test::scratch_dir("processes");
  const auto full = ck::test::random_values(8 * 6, 21);
  auto state_of = [&](int r) {
    ck::rank_state s;
    s.pieces.push_back(ck::test::piece_of("w", full, {8, 6}, {0, 2 * r}, {8, 2}));  // column blocks
    if (r == 0) s.common = nlohmann::json{{"iteration", 9}};
    return s;
  };
  ck::save_options o;
  o.attempt_id = "job-42";
  std::vector<pid_t> children;
  for (int r = 1; r < 3; ++r) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        ck::save(dir.string(), 9, r, 3, state_of(r), o);
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ck::save(dir.string(), 9, 0, 3, state_of(0), o);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  REQUIRE(ck::read_tracker(dir.string()) == 9);
  ck::checkpoint_reader reader(dir.string());
  CHECK(reader.metadata().files.size() == 3);
  CHECK(ck::test::bitwise_equal(reader.read_whole("w"), full));
  CHECK_FALSE(fs::exists(dir / "iter_0000009.tmp-job-42"));
}
