// async_saver: save_async returns while the write is held back, a second save waits for the
// first, and errors from the background thread surface on wait().
#include "checkpoint/async_saver.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <future>
#include <thread>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint_test_util.hpp"

namespace ck = mactor::checkpoint;
namespace fs = std::filesystem;

namespace {
ck::rank_state small_state(float value) {
  ck::rank_state s;
  s.pieces.push_back(ck::whole_tensor("x", {4}, std::vector<float>(4, value)));
  s.common = nlohmann::json{{"value", value}};
  return s;
}
}  // namespace

TEST_CASE("save_async returns before the write and the data is a snapshot taken at the call") {
  const auto dir = ck::test::scratch_dir("async");
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> writer_started{false};
  ck::save_options o;
  o.before_write = [&] {
    writer_started = true;
    released.wait();
  };
  ck::async_saver saver;
  auto state = small_state(1.0f);
  saver.save_async(dir.string(), 1, 0, 1, state, o);
  state.pieces[0].data.assign(4, 9.0f);  // the caller goes on changing its copy
  CHECK(saver.pending());
  CHECK_FALSE(fs::exists(dir / "iter_0000001"));  // held in before_write: nothing committed yet
  CHECK_FALSE(ck::read_tracker(dir.string()).has_value());
  release.set_value();
  saver.wait();
  CHECK(writer_started);
  CHECK_FALSE(saver.pending());
  CHECK(ck::read_tracker(dir.string()) == 1);
  CHECK(ck::checkpoint_reader(dir.string()).read_whole("x") == std::vector<float>(4, 1.0f));
}

TEST_CASE("a second save_async waits until the first save has committed") {
  const auto dir = ck::test::scratch_dir("async2");
  std::promise<void> release;
  auto released = release.get_future().share();
  ck::save_options first;
  first.before_write = [&] { released.wait(); };
  ck::save_options second;
  std::atomic<bool> first_committed_before_second{false};
  second.before_write = [&] { first_committed_before_second = fs::exists(dir / "iter_0000001"); };
  ck::async_saver saver;
  saver.save_async(dir.string(), 1, 0, 1, small_state(1.0f), first);
  std::atomic<bool> second_returned{false};
  std::thread caller([&] {
    saver.save_async(dir.string(), 2, 0, 1, small_state(2.0f), second);
    second_returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(second_returned);  // still blocked behind the held first save
  release.set_value();
  caller.join();
  saver.wait();
  CHECK(first_committed_before_second);
  CHECK(ck::read_tracker(dir.string()) == 2);
}

TEST_CASE("an error in a background save is rethrown by wait and by the next save_async") {
  const auto dir = ck::test::scratch_dir("async3");
  ck::async_saver saver;
  auto no_common = small_state(1.0f);
  no_common.common.reset();
  saver.save_async(dir.string(), 1, 0, 1, no_common);
  CHECK_THROWS_WITH(saver.wait(), Catch::Contains("common document"));
  CHECK_NOTHROW(saver.wait());  // reported once
  std::ofstream(dir / "blocker") << "a file where a directory is needed";
  saver.save_async((dir / "blocker" / "sub").string(), 1, 0, 1, small_state(1.0f));
  CHECK_THROWS_AS(saver.save_async(dir.string(), 2, 0, 1, small_state(2.0f)), ck::checkpoint_error);
  saver.save_async(dir.string(), 3, 0, 1, small_state(3.0f));
  saver.wait();
  CHECK(ck::read_tracker(dir.string()) == 3);
}
