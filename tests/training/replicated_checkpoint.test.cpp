// Replicated local checkpoints (--replication, --replication-jump, --replication-factor): every
// rank keeps its clique peers' copies beside its own; a rank whose own local storage is gone (a
// replaced node) resumes from a peer's copy, and the run continues as the uninterrupted one, bit
// for bit. The cliques are checked against a second construction (NVIDIA Resiliency Extension's
// docstring example and its "ranks b, b+J, ... cut into groups of F" recipe).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/durable_file.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/local_checkpoint.hpp"
#include "checkpoint/replication.hpp"
#include "tests/training/launch_support.hpp"

namespace fs = std::filesystem;
using namespace mactor::test;
using namespace mactor::checkpoint;

namespace {

std::string model_flags(int iterations) {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters " +
         std::to_string(iterations) + " --lr-decay-iters 8 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine "
         "--lr-warmup-iters 2 --clip-grad 1.0 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 "
         "--log-interval 1 --eval-iters 0 --seed 11";
}

std::string replicated(const fs::path& local, int jump, int factor) {
  return " --non-persistent-save-interval 2 --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir " +
         local.string() + " --replication --replication-jump " + std::to_string(jump) + " --replication-factor " +
         std::to_string(factor);
}

void check_continues(const std::string& resumed, const std::string& uninterrupted, int first, int last) {
  const auto want = iteration_lines(uninterrupted), got = iteration_lines(resumed);
  REQUIRE(got.size() == static_cast<std::size_t>(last - first + 1));
  REQUIRE(got.begin()->first == first);
  for (const auto& [iteration, fields] : got) {
    INFO("iteration " << iteration);
    CHECK(fields == want.at(iteration));
  }
}

// The cliques as the resiliency extension's docstring builds them: for each b < J, the ranks
// b, b+J, b+2J, ... cut into consecutive groups of F.
std::vector<std::vector<int>> cliques_by_recipe(int jump, int factor, int world) {
  std::vector<std::vector<int>> out;
  for (int b = 0; b < jump; ++b) {
    std::vector<int> seq;
    for (int r = b; r < world; r += jump) seq.push_back(r);
    for (std::size_t i = 0; i < seq.size(); i += static_cast<std::size_t>(factor))
      out.emplace_back(seq.begin() + static_cast<std::ptrdiff_t>(i), seq.begin() + static_cast<std::ptrdiff_t>(i) + factor);
  }
  return out;
}

}  // namespace

TEST_CASE("replication cliques are the resiliency extension's") {
  // Its docstring's example: 32 ranks, jump 8, factor 2 -> 0-8, 1-9, ..., 7-15, 16-24, ..., 23-31.
  for (int r = 0; r < 32; ++r) {
    const int first = r % 16 < 8 ? r : r - 8;
    CHECK(replication_clique(r, 8, 2, 32) == std::vector<int>{first, first + 8});
  }
  for (const auto& [jump, factor, world] : {std::tuple{1, 2, 4}, {2, 2, 8}, {3, 2, 12}, {2, 3, 12}, {1, 4, 8}, {4, 1, 8}})
    for (const auto& clique : cliques_by_recipe(jump, factor, world))
      for (int r : clique) {
        INFO("rank " << r << " jump " << jump << " factor " << factor << " world " << world);
        CHECK(replication_clique(r, jump, factor, world) == clique);
      }
  CHECK_THROWS_WITH(replication_clique(0, 3, 2, 8), Catch::Contains("divisible by --replication-jump (3) times"));
}

TEST_CASE("a packed iteration unpacks to the same files and a damaged one is refused") {
  const auto dir = scratch_dir("replicated_checkpoints", "pack");
  const auto from = dir / "src" / "iter_0000004";
  fs::create_directories(from / "sub");
  std::ofstream(from / "a.bin") << std::string("\0\1\2 bytes", 9);
  std::ofstream(from / "sub" / "b.json") << "{\"x\": 1}";
  const std::string packed = pack_iteration(from);
  unpack_iteration(packed, dir / "dst", 4);
  CHECK(read_whole_file(dir / "dst" / "iter_0000004" / "a.bin") == std::string("\0\1\2 bytes", 9));
  CHECK(read_whole_file(dir / "dst" / "iter_0000004" / "sub" / "b.json") == "{\"x\": 1}");
  CHECK(read_tracker((dir / "dst").string()) == 4);
  CHECK(complete_iterations((dir / "dst").string()) == std::vector<std::int64_t>{4});
  CHECK_THROWS_AS(unpack_iteration(packed.substr(0, packed.size() - 3), dir / "cut", 4), checkpoint_error);
  CHECK_THROWS_AS(unpack_iteration("not a replica", dir / "bad", 4), checkpoint_error);
  CHECK(complete_iterations((dir / "cut").string()).empty());  // nothing committed from a cut copy
  fs::remove_all(dir);
}

TEST_CASE("the resume plan takes the newest iteration held for every rank, from its own copy or a peer's") {
  // 4 ranks, jump 1, factor 2: cliques {0,1} and {2,3}; held[r][k] = what r holds of its clique's k-th member.
  replica_holdings held = {{{4, 6}, {4, 6}}, {{4, 6}, {4, 6}}, {{4, 6}, {4, 6}}, {{4, 6}, {4, 6}}};
  auto plan = plan_replica_resume(held, 1, 2);
  CHECK(plan.iteration == 6);
  CHECK(plan.transfers.empty());
  held[1] = {{}, {}};  // rank 1's node replaced: nothing local, neither its own nor rank 0's copy
  plan = plan_replica_resume(held, 1, 2);
  REQUIRE(plan.iteration == 6);
  REQUIRE(plan.transfers.size() == 1);
  CHECK(plan.transfers[0].holder == 0);
  CHECK(plan.transfers[0].owner == 1);
  held[3] = {{4}, {4}};  // rank 3 missed 6, and rank 2's copy of rank 3's 6 is all there is
  plan = plan_replica_resume(held, 1, 2);
  REQUIRE(plan.iteration == 6);
  REQUIRE(plan.transfers.size() == 2);
  CHECK(plan.transfers[1].holder == 2);
  CHECK(plan.transfers[1].owner == 3);
  held[2] = {{4, 6}, {4}};
  plan = plan_replica_resume(held, 1, 2);
  CHECK(plan.iteration == 4);  // rank 3's 6 is nowhere: every rank goes back to 4
  REQUIRE(plan.transfers.size() == 1);
  CHECK(plan.transfers[0].owner == 1);
  held[0] = {{6}, {6}};
  CHECK_FALSE(plan_replica_resume(held, 1, 2).iteration);  // rank 1's 4 is lost with both copies
}

TEST_CASE("replicated local checkpoints: a rank whose local storage is lost resumes from its peer's copy") {
  const auto dir = scratch_dir("replicated_checkpoints", "lost"), local = scratch_dir("replicated_checkpoints", "lost_local");
  const std::string layout = " --use-distributed-optimizer";
  const auto full = launch(2, model_flags(8) + layout);
  const std::string flags = model_flags(8) + layout + " --save " + dir.string() + " --save-interval 100" + replicated(local, 1, 2);
  launch(2, flags + " --exit-interval 6");
  for (const auto& [holder, owner] : {std::pair{0, 1}, {1, 0}}) {
    const auto copies = replica_dir(local.string(), holder, owner);
    CHECK(complete_iterations(copies) == std::vector<std::int64_t>{4, 6});
    const auto own = iteration_dir(local_rank_dir(local.string(), owner), 6);
    CHECK(read_whole_file(iteration_dir(copies, 6) / shard_file_name(0)) == read_whole_file(own / shard_file_name(0)));
  }
  fs::remove_all(local_rank_dir(local.string(), 1));  // rank 1's node is replaced: its own and rank 0's copies go
  const auto resumed = launch(2, flags + " --load " + dir.string());
  CHECK(resumed.out.find("rank 1: restored its local checkpoint of iteration 6 from rank 0's replica") != std::string::npos);
  CHECK(resumed.out.find("Loading from a local non-persistent checkpoint (non-persistent iter 6)") != std::string::npos);
  check_continues(resumed.out, full.out, 7, 8);
  fs::remove_all(dir);
  fs::remove_all(local);
}

TEST_CASE("replicated local checkpoints over 4 ranks two apart: two lost nodes, and a clique lost whole") {
  const auto dir = scratch_dir("replicated_checkpoints", "four"), local = scratch_dir("replicated_checkpoints", "four_local");
  const std::string layout = " --tensor-model-parallel-size 2";
  const auto full = launch(4, model_flags(10) + layout);
  // Cliques {0, 2} and {1, 3}: a copy lives two ranks away (another node with 2 ranks per node).
  const std::string flags = model_flags(10) + layout + " --save " + dir.string() + " --save-interval 4" + replicated(local, 2, 2);
  launch(4, flags + " --exit-interval 6");
  CHECK(complete_iterations(replica_dir(local.string(), 2, 0)) == std::vector<std::int64_t>{2, 6});
  CHECK(complete_iterations(replica_dir(local.string(), 3, 1)) == std::vector<std::int64_t>{2, 6});
  CHECK_FALSE(fs::exists(replica_dir(local.string(), 1, 0)));  // rank 1 is not in rank 0's clique
  fs::remove_all(local_rank_dir(local.string(), 1));
  fs::remove_all(local_rank_dir(local.string(), 2));
  const auto resumed = launch(4, flags + " --load " + dir.string() + " --exit-interval 8");
  CHECK(resumed.out.find("rank 1: restored its local checkpoint of iteration 6 from rank 3's replica") != std::string::npos);
  CHECK(resumed.out.find("rank 2: restored its local checkpoint of iteration 6 from rank 0's replica") != std::string::npos);
  check_continues(resumed.out, full.out, 7, 8);
  // Now the whole clique {1, 3} is lost: no local iteration is held for them, so the persistent
  // checkpoint of iteration 8 (--save-interval 4) is the one resumed.
  fs::remove_all(local_rank_dir(local.string(), 1));
  fs::remove_all(local_rank_dir(local.string(), 3));
  const auto fallback = launch(4, flags + " --load " + dir.string());
  CHECK(fallback.out.find("restored its local checkpoint") == std::string::npos);
  check_continues(fallback.out, full.out, 9, 10);
  fs::remove_all(dir);
  fs::remove_all(local);
}

TEST_CASE("replication flags are refused where the ranks do not split into cliques") {
  const auto local = scratch_dir("replicated_checkpoints", "refused");
  const auto r = launch(4, model_flags(4) + " --save " + local.string() + replicated(local, 3, 2), 2);
  CHECK(r.err.find("cannot be split into replication groups of 2 ranks 3 apart") != std::string::npos);
}
