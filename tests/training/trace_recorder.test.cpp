// --profile's parts without a job: the window of each profiler mode, the recorder that records
// only inside it (and allocates nothing outside it), the file it writes (read back by
// nlohmann-json: overlapping transfers on separate threads, ts and dur in microseconds), and the
// unwritable folder refused up front.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.hpp"
#include "comm/watched_communicator.hpp"
#include "config/megatron_args.hpp"
#include "training/profile_plan.hpp"
#include "training/trace_file.hpp"
#include "training/trace_recorder.hpp"

using namespace mactor;
using training::trace_recorder;
using training::trace_track;
namespace fs = std::filesystem;

namespace {

config::megatron_args profiled(bool pytorch, std::int64_t start, std::int64_t end) {
  config::megatron_args a;
  a.training.profile = true;
  a.training.use_pytorch_profiler = pytorch;
  a.training.profile_step_start = start;
  a.training.profile_step_end = end;
  a.training.profile_ranks = {0, 2};
  return a;
}

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("mactor_trace_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("the profiled iterations are torch.profiler's schedule or nsys's capture range") {
  const auto torch = training::profile_plan_of(profiled(true, 10, 12), 2, 1, 0, 0);
  CHECK(torch.enabled);
  CHECK((torch.first == 10 && torch.last == 11));
  CHECK(torch.process_name == "rank 2 (pp 1, tp 0, dp 0)");
  const auto nsys = training::profile_plan_of(profiled(false, 10, 12), 0, 0, 0, 0);
  CHECK((nsys.first == 11 && nsys.last == 12));
  CHECK_FALSE(nsys.covers(10));
  CHECK(nsys.covers(12));
  // Step 0 of torch's schedule is before the first iteration.
  CHECK(training::profile_plan_of(profiled(true, 0, 2), 0, 0, 0, 0).first == 1);
  CHECK_FALSE(training::profile_plan_of(profiled(true, 10, 12), 1, 0, 0, 1).enabled);
  auto off = profiled(true, 10, 12);
  off.training.profile = false;
  CHECK_FALSE(training::profile_plan_of(off, 0, 0, 0, 0).covers(10));
}

TEST_CASE("the recorder records only inside its window and writes the file after its last iteration") {
  auto a = profiled(true, 2, 4);
  const auto dir = scratch("window");
  a.training.tensorboard_dir = dir.string();
  trace_recorder r(training::profile_plan_of(a, 0, 0, 0, 0));
  const auto t0 = trace_recorder::clock::now();
  r.begin_iteration(1);
  CHECK_FALSE(r.active());
  r.span("forward mb 0 chunk 0", "compute", t0, t0);
  { const trace_recorder::scope s(r, "optimizer", "optimizer"); }
  CHECK(r.size() == 0);
  CHECK_FALSE(r.end_iteration(t0, false));
  for (std::int64_t it : {2, 3}) {
    r.begin_iteration(it);
    REQUIRE(r.active());
    const auto start = trace_recorder::clock::now();
    // Two sends in flight at once, and a span from another thread.
    r.span("send activation mb 0 chunk 0", "pipeline", start, start + std::chrono::microseconds(50), {{"bytes", 64}},
           trace_track::send);
    r.span("send activation mb 1 chunk 0", "pipeline", start + std::chrono::microseconds(10),
           start + std::chrono::microseconds(60), {{"bytes", 64}}, trace_track::send);
    std::thread([&] {
      comm::mark_background_thread();
      const trace_recorder::scope s(r, "data-parallel grads all-reduce", "grad_sync", {{"bytes", 8}});
    }).join();
    { const trace_recorder::scope s(r, "optimizer", "optimizer"); }
    const auto w = r.end_iteration(start, false);
    CHECK(w.has_value() == (it == 3));
  }
  CHECK_FALSE(r.active());
  std::vector<fs::path> files(fs::directory_iterator(dir), fs::directory_iterator{});
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename().string().rfind("rank0.", 0) == 0);
  CHECK(files[0].filename().string().find(".pt.trace.json") != std::string::npos);
  const auto trace = nlohmann::json::parse(std::ifstream(files[0]));
  std::map<std::string, int> count;
  std::set<int> send_threads, all_threads;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++count[e.at("name").get<std::string>()];
    all_threads.insert(e.at("tid").get<int>());
    CHECK(e.at("dur").get<double>() >= 0);
    CHECK(e.at("ts").get<double>() > 1.5e15);  // microseconds since the epoch (after 2017)
    if (e.at("cat") == "pipeline") {
      send_threads.insert(e.at("tid").get<int>());
      CHECK(e.at("args").at("bytes") == 64);
    }
  }
  CHECK(count["iteration 2"] == 1);
  CHECK(count["iteration 3"] == 1);
  CHECK(count["optimizer"] == 2);
  CHECK(count["data-parallel grads all-reduce"] == 2);
  CHECK(send_threads.size() == 2);  // overlapping sends on two lanes
  CHECK(all_threads.size() == 4);   // training, background and two send lanes
  // Nothing is recorded after the window.
  r.begin_iteration(4);
  CHECK_FALSE(r.active());
  fs::remove_all(dir);
}

TEST_CASE("a run that ends inside the window writes what it has and an unwritable folder is refused") {
  auto a = profiled(false, 0, 100);
  const auto dir = scratch("early");
  a.training.tensorboard_dir = (dir / "made").string();
  const auto plan = training::profile_plan_of(a, 0, 0, 0, 0);
  training::prepare_profile_folder(plan);  // creates it, as torch's handler does
  CHECK(fs::is_directory(dir / "made"));
  {
    trace_recorder r(plan);
    r.begin_iteration(1);
    r.span("forward mb 0 chunk 0", "compute", trace_recorder::clock::now(), trace_recorder::clock::now());
  }
  CHECK(std::distance(fs::directory_iterator(dir / "made"), fs::directory_iterator{}) == 1);

  std::ofstream(dir / "file") << "not a folder";
  a.training.tensorboard_dir = (dir / "file").string();
  CHECK_THROWS_AS(training::prepare_profile_folder(training::profile_plan_of(a, 0, 0, 0, 0)), checkpoint::checkpoint_error);
  a.training.tensorboard_dir = "/proc/mactor-cannot-write";
  CHECK_THROWS_WITH(training::prepare_profile_folder(training::profile_plan_of(a, 0, 0, 0, 0)),
                    Catch::Contains("--tensorboard-dir /proc/mactor-cannot-write"));
  // A rank that is not profiled checks nothing.
  CHECK_NOTHROW(training::prepare_profile_folder(training::profile_plan_of(a, 1, 0, 0, 0)));
  fs::remove_all(dir);
}
