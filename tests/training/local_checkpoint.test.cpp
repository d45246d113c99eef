// Local non-persistent checkpoints (--non-persistent-ckpt-type local, --non-persistent-local-ckpt-dir),
// launched with `mactor`: each rank commits its own whole state under <dir>/rank_N, a resume takes
// the newest iteration every rank holds (over an older persistent checkpoint, as Megatron's
// _load_base_checkpoint does) and continues as the uninterrupted run bit for bit.
#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/local_checkpoint.hpp"
#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace mactor::test;
using mactor::checkpoint::complete_iterations;

namespace {

std::string model_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 8 --lr-decay-iters 8 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --tokenizer-type "
         "NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 --log-interval 1 --eval-iters 0 --seed 11";
}

fs::path scratch(const std::string& name) { return scratch_dir("local_checkpoints", name); }

std::string local_flags(const fs::path& local, const std::string& algo) {
  return " --non-persistent-save-interval 2 --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir " +
         local.string() + " --non-persistent-local-ckpt-algo " + algo;
}

// The resumed run's iteration lines from `first` on equal the uninterrupted run's.
void check_continues(const std::string& resumed, const std::string& uninterrupted, int first) {
  const auto want = iteration_lines(uninterrupted), got = iteration_lines(resumed);
  REQUIRE(got.size() == static_cast<std::size_t>(8 - first + 1));
  REQUIRE(got.begin()->first == first);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));
  }
}

}  // namespace

TEST_CASE("local checkpoints: each rank keeps its own two newest and a resume beats an older persistent one") {
  const std::string layout = " --use-distributed-optimizer";
  const auto dir = scratch("run"), local = scratch("run_local");
  const auto full = launch(2, model_flags() + layout);
  // Persistent at 4; local at 2 and 6 (4 is the persistent one's); the exit at 6 is spared its save.
  const std::string flags = model_flags() + layout + " --save " + dir.string() + " --save-interval 4" +
                            local_flags(local, "fully_parallel");
  const auto first = launch(2, flags + " --exit-interval 6");
  CHECK(first.out.find("saving checkpoint at iteration       6 to " + local.string()) != std::string::npos);
  REQUIRE(mactor::checkpoint::read_tracker(dir.string()) == 4);
  for (const int rank : {0, 1}) {
    const auto own = mactor::checkpoint::local_rank_dir(local.string(), rank);
    CHECK(complete_iterations(own) == std::vector<std::int64_t>{2, 6});
    mactor::checkpoint::checkpoint_reader(own, 6).verify_all();  // the rank's own, whole: commons included
  }
  const auto resumed = launch(2, flags + " --load " + dir.string());
  CHECK(resumed.out.find("Loading from a local non-persistent checkpoint (non-persistent iter 6)") != std::string::npos);
  check_continues(resumed.out, full.out, 7);
}

TEST_CASE("local checkpoints: a rank missing the newest makes every rank resume from the one they share") {
  // Tensor parallel without the distributed optimizer: each rank's state holds replicated tensors
  // the global format saves from rank 0 alone.
  const std::string layout = " --tensor-model-parallel-size 2";
  const auto dir = scratch("fallback"), local = scratch("fallback_local");
  const auto full = launch(2, model_flags() + layout);
  const std::string flags = model_flags() + layout + " --save " + dir.string() + " --save-interval 100" +
                            local_flags(local, "atomic");
  launch(2, flags + " --exit-interval 6");
  CHECK_FALSE(mactor::checkpoint::read_tracker(dir.string()));
  const auto rank1 = mactor::checkpoint::local_rank_dir(local.string(), 1);
  REQUIRE(complete_iterations(rank1) == std::vector<std::int64_t>{4, 6});
  fs::remove_all(fs::path(rank1) / "iter_0000006");
  const auto resumed = launch(2, flags + " --load " + dir.string());
  CHECK(resumed.out.find("Loading from a local non-persistent checkpoint (non-persistent iter 4)") != std::string::npos);
  check_continues(resumed.out, full.out, 5);
}

TEST_CASE("local checkpoints: the ranks agree on the newest iteration they all hold") {
  using mactor::checkpoint::newest_common_iteration;
  CHECK(newest_common_iteration({{2, 4, 6}, {4, 6}, {2, 4}}) == 4);
  CHECK(newest_common_iteration({{6, 2}, {2, 6}}) == 6);  // the lists need not be sorted
  CHECK_FALSE(newest_common_iteration({{6}, {4}}));
  CHECK_FALSE(newest_common_iteration({{2, 4}, {}}));
  CHECK_FALSE(newest_common_iteration({}));
}
