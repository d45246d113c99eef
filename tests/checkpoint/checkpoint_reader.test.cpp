// Damaged checkpoints: a flipped byte, a truncated, deleted or extended shard, missing metadata,
// common document or tracker are each a checkpoint_error naming the file and the fix.
#include "checkpoint/checkpoint_reader.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/save.hpp"
#include "checkpoint_test_util.hpp"

namespace ck = mactor::checkpoint;
namespace fs = std::filesystem;

namespace {

const char* fix = "re-save or load an older iteration with --ckpt-step";

// Two ranks each save a half of "w" (rows) and their own "bias_<rank>".
fs::path two_rank_checkpoint(const std::string& tag, std::vector<float>& full) {
  const auto dir = ck::test::scratch_dir(tag);
  full = ck::test::random_values(64 * 16, 11);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      ck::rank_state s;
      s.pieces.push_back(ck::test::piece_of("w", full, {64, 16}, {32 * r, 0}, {32, 16}));
      s.pieces.push_back(ck::whole_tensor("bias_" + std::to_string(r), {3}, {1.0f, 2.0f, 3.0f}));
      if (r == 0) s.common = nlohmann::json{{"iteration", 5}};
      ck::save(dir.string(), 5, r, 2, std::move(s));
    });
  for (auto& t : ranks) t.join();
  return dir;
}

void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x10);
  f.seekp(at);
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("an altered byte in a shard fails the CRC of the tensor that covers it, naming the file") {
  std::vector<float> full;
  const auto dir = two_rank_checkpoint("flip", full);
  const auto shard = dir / "iter_0000005" / "__1_0.distcp";
  flip_byte(shard, 16 + 4 * 100);  // inside rank 1's half of w
  ck::checkpoint_reader reader(dir.string());
  CHECK(reader.read_whole("bias_1") == std::vector<float>{1.0f, 2.0f, 3.0f});
  ck::tensor_piece top = ck::whole_tensor("w", {64, 16});
  top.shape = {32, 16};
  reader.read(top);  // rank 0's half is intact
  CHECK(ck::test::bitwise_equal(top.data, std::vector<float>(full.begin(), full.begin() + 512)));
  CHECK_THROWS_WITH(reader.read_whole("w"), Catch::Contains(shard.string()) &&
                                                Catch::Contains("CRC-32") && Catch::Contains(fix));
  CHECK_THROWS_AS(reader.verify_all(), ck::checkpoint_error);
}

TEST_CASE("a truncated, deleted or extended shard is reported when the checkpoint is opened") {
  std::vector<float> full;
  const auto dir = two_rank_checkpoint("files", full);
  const auto shard0 = dir / "iter_0000005" / "__0_0.distcp";
  const auto shard1 = dir / "iter_0000005" / "__1_0.distcp";
  const auto size0 = fs::file_size(shard0);
  const auto backup = dir / "shard0.backup";
  fs::copy_file(shard0, backup);
  fs::resize_file(shard0, size0 - 7);
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string()),
                    Catch::Contains(shard0.string()) && Catch::Contains("truncated") && Catch::Contains(fix));
  fs::resize_file(shard0, size0 + 1);
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string()),
                    Catch::Contains(shard0.string()) && Catch::Contains("longer"));
  fs::copy_file(backup, shard0, fs::copy_options::overwrite_existing);
  flip_byte(shard0, 2);  // the header's magic
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string()),
                    Catch::Contains(shard0.string()) && Catch::Contains("header"));
  flip_byte(shard0, 2);
  CHECK_NOTHROW(ck::checkpoint_reader(dir.string()).verify_all());
  fs::remove(shard1);
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string()),
                    Catch::Contains(shard1.string()) && Catch::Contains("missing") && Catch::Contains(fix));
}

TEST_CASE("missing metadata, common document, iteration directory or tracker are named") {
  std::vector<float> full;
  const auto dir = two_rank_checkpoint("meta", full);
  const auto iter = dir / "iter_0000005";
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string(), 4),
                    Catch::Contains((dir / "iter_0000004").string()) && Catch::Contains(fix));
  std::ofstream(iter / "metadata.json", std::ios::app) << "}";
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string()),
                    Catch::Contains((iter / "metadata.json").string()) && Catch::Contains("JSON"));
  fs::remove(iter / "metadata.json");
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir.string()),
                    Catch::Contains((iter / "metadata.json").string()) && Catch::Contains(fix));
  const auto dir2 = two_rank_checkpoint("common", full);
  fs::remove(dir2 / "iter_0000005" / "common.json");
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir2.string()), Catch::Contains("common.json"));
  const auto dir3 = two_rank_checkpoint("tracker", full);
  fs::remove(dir3 / "latest_checkpointed_iteration.txt");
  CHECK_THROWS_WITH(ck::checkpoint_reader(dir3.string()),
                    Catch::Contains("latest_checkpointed_iteration.txt") && Catch::Contains("--ckpt-step"));
  CHECK_NOTHROW(ck::checkpoint_reader(dir3.string(), 5));
}
