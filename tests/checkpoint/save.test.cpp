// save() + checkpoint_reader: multi-rank saves (ranks are threads) read back under other layouts,
// compared bitwise with a naive element-by-element slice of the full tensors.
#include "checkpoint/save.hpp"

#include <catch2/catch.hpp>

#include <fstream>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint_test_util.hpp"
#include "tests/tools/rank_threads.hpp"

namespace ck = mactor::checkpoint;
using ck::test::extract;
using ck::test::piece_of;
using shape_t = std::vector<std::int64_t>;

namespace {

struct model_tensors {
  shape_t a_shape{12, 10}, c_shape{3, 4, 5}, b_shape{7}, e_shape{5}, d_shape{};
  std::vector<float> a = ck::test::random_values(120, 1), b = ck::test::random_values(7, 2),
                     c = ck::test::random_values(60, 3), d = ck::test::random_values(1, 4),
                     e = ck::test::random_values(5, 5);
};

// Rank r of 4: A in row blocks; B in flat ranges of the whole vector; C split on the last dim
// between ranks {0,1} and {2,3}, each half flat-split between its two ranks (the distributed
// optimizer's layout); E replicated on every rank; the scalar D on rank 0.
ck::rank_state state_of_rank(const model_tensors& t, int r) {
  ck::rank_state s;
  s.pieces.push_back(piece_of("a", t.a, t.a_shape, {3 * r, 0}, {3, 10}));
  const std::int64_t b_cuts[5] = {0, 2, 3, 6, 7};
  s.pieces.push_back(piece_of("b", t.b, t.b_shape, {0}, {7}, std::make_pair(b_cuts[r], b_cuts[r + 1])));
  if (r < 2)
    s.pieces.push_back(piece_of("c", t.c, t.c_shape, {0, 0, 0}, {3, 4, 2},
                                r == 0 ? std::make_pair(0L, 11L) : std::make_pair(11L, 24L)));
  else
    s.pieces.push_back(piece_of("c", t.c, t.c_shape, {0, 0, 2}, {3, 4, 3},
                                r == 2 ? std::make_pair(0L, 20L) : std::make_pair(20L, 36L)));
  s.pieces.push_back(piece_of("e", t.e, t.e_shape, {0}, {5}));
  if (r == 0) {
    s.pieces.push_back(piece_of("d", t.d, t.d_shape, {}, {}));
    s.common = nlohmann::json{{"iteration", 100}, {"args", {{"num_layers", 2}}}};
  }
  return s;
}

void save_from_threads(const std::string& dir, std::int64_t iteration, const model_tensors& t) {
  mactor::test::on_rank_threads(4, [&](int r) { ck::save(dir, iteration, r, 4, state_of_rank(t, r)); });
}

void check_request(const ck::checkpoint_reader& reader, const std::string& name,
                   const std::vector<float>& full, const shape_t& global, const shape_t& offset,
                   const shape_t& shape, std::optional<std::pair<std::int64_t, std::int64_t>> range = {}) {
  ck::tensor_piece req;
  req.name = name, req.global_shape = global, req.offset = offset, req.shape = shape;
  req.flat_range = range;
  reader.read(req);
  const auto [b, e] = range ? *range : std::make_pair<std::int64_t, std::int64_t>(0, ck::numel(shape));
  INFO(name << " offset " << offset.size() << "d, range [" << b << ", " << e << ")");
  CHECK(ck::test::bitwise_equal(req.data, extract(full, global, offset, shape, b, e)));
}

}  // namespace

TEST_CASE("four ranks' row blocks, flat ranges and replicas load back bitwise as whole tensors") {
  const auto dir = ck::test::scratch_dir("roundtrip").string();
  model_tensors t;
  save_from_threads(dir, 100, t);
  REQUIRE(ck::read_tracker(dir) == 100);
  REQUIRE(std::filesystem::is_directory(std::filesystem::path(dir) / "iter_0000100"));
  ck::checkpoint_reader reader(dir);
  CHECK(reader.iteration() == 100);
  CHECK(reader.common()["args"]["num_layers"] == 2);
  CHECK(reader.names() == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(reader.global_shape("c") == t.c_shape);
  CHECK(reader.metadata().tensors.at("e").pieces.size() == 1);  // the replicas are stored once
  CHECK(ck::test::bitwise_equal(reader.read_whole("a"), t.a));
  CHECK(ck::test::bitwise_equal(reader.read_whole("b"), t.b));
  CHECK(ck::test::bitwise_equal(reader.read_whole("c"), t.c));
  CHECK(ck::test::bitwise_equal(reader.read_whole("d"), t.d));
  CHECK(ck::test::bitwise_equal(reader.read_whole("e"), t.e));
  reader.verify_all();
}

TEST_CASE("a checkpoint saved in one decomposition loads under others: column blocks, flat ranges, sub-slices") {
  const auto dir = ck::test::scratch_dir("reshard").string();
  model_tensors t;
  save_from_threads(dir, 7, t);
  ck::checkpoint_reader reader(dir, 7);
  for (std::int64_t c0 : {0, 5}) check_request(reader, "a", t.a, t.a_shape, {0, c0}, {12, 5});
  check_request(reader, "a", t.a, t.a_shape, {0, 0}, {12, 10}, std::make_pair(0L, 37L));
  check_request(reader, "a", t.a, t.a_shape, {0, 0}, {12, 10}, std::make_pair(37L, 120L));
  check_request(reader, "a", t.a, t.a_shape, {2, 3}, {7, 6}, std::make_pair(4L, 29L));
  for (std::int64_t r0 : {0, 1, 2}) check_request(reader, "c", t.c, t.c_shape, {r0, 0, 0}, {1, 4, 5});
  check_request(reader, "c", t.c, t.c_shape, {1, 1, 1}, {2, 3, 4}, std::make_pair(3L, 17L));
  check_request(reader, "c", t.c, t.c_shape, {0, 2, 0}, {3, 2, 5});
  check_request(reader, "b", t.b, t.b_shape, {2}, {4});
  check_request(reader, "b", t.b, t.b_shape, {1}, {6}, std::make_pair(1L, 4L));
}

TEST_CASE("random decompositions of a 3-d tensor reshard into random requests exactly") {
  std::mt19937 gen(42);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  for (int trial = 0; trial < 12; ++trial) {
    const shape_t g{pick(1, 6), pick(1, 7), pick(1, 9)};
    const auto full = ck::test::random_values(ck::numel(g), 100 + trial);
    // Cut one dim into blocks, then cut each block's flat range into up to 3 ranges.
    const int dim = int(pick(0, 2));
    ck::rank_state state;
    state.common = nlohmann::json::object();
    for (std::int64_t lo = 0; lo < g[dim];) {
      const std::int64_t hi = std::min(g[dim], lo + pick(1, 3));
      shape_t off{0, 0, 0}, shp = g;
      off[dim] = lo, shp[dim] = hi - lo;
      for (std::int64_t b = 0, n = ck::numel(shp); b < n;) {
        const std::int64_t e = std::min(n, b + pick(1, n));
        state.pieces.push_back(piece_of("t", full, g, off, shp, std::make_pair(b, e)));
        b = e;
      }
      lo = hi;
    }
    const auto dir = ck::test::scratch_dir("random").string();
    ck::save(dir, trial, 0, 1, std::move(state));
    ck::checkpoint_reader reader(dir);
    for (int q = 0; q < 8; ++q) {
      shape_t off(3), shp(3);
      for (int d = 0; d < 3; ++d) {
        off[d] = pick(0, g[d] - 1);
        shp[d] = pick(1, g[d] - off[d]);
      }
      const std::int64_t n = ck::numel(shp), b = pick(0, n - 1), e = pick(b + 1, n);
      check_request(reader, "t", full, g, off, shp, std::make_pair(b, e));
    }
  }
}

TEST_CASE("a slice no saved piece holds is an error naming the tensor and the element") {
  const auto dir = ck::test::scratch_dir("hole").string();
  const auto full = ck::test::random_values(20, 9);
  ck::rank_state s;
  s.common = nlohmann::json::object();
  s.pieces.push_back(piece_of("w", full, {4, 5}, {0, 0}, {4, 5}, std::make_pair(0L, 12L)));
  ck::save(dir, 1, 0, 1, std::move(s));
  ck::checkpoint_reader reader(dir);
  ck::tensor_piece ok = ck::whole_tensor("w", {4, 5});
  ok.offset = {0, 0}, ok.shape = {2, 5};
  reader.read(ok);
  CHECK(ck::test::bitwise_equal(ok.data, std::vector<float>(full.begin(), full.begin() + 10)));
  ck::tensor_piece missing = ck::whole_tensor("w", {4, 5});
  CHECK_THROWS_WITH(reader.read(missing), Catch::Contains("w") && Catch::Contains("[2, 2]"));
  ck::tensor_piece unknown = ck::whole_tensor("v", {4, 5});
  CHECK_THROWS_WITH(reader.read(unknown), Catch::Contains("no tensor \"v\""));
  ck::tensor_piece wrong = ck::whole_tensor("w", {5, 4});
  CHECK_THROWS_WITH(reader.read(wrong), Catch::Contains("[4, 5]") && Catch::Contains("[5, 4]"));
}

TEST_CASE("pieces whose data size or slice disagree are rejected before anything is written") {
  const auto dir = ck::test::scratch_dir("badpiece").string();
  ck::rank_state s;
  s.common = nlohmann::json::object();
  s.pieces.push_back(ck::whole_tensor("x", {3, 3}, std::vector<float>(8)));
  CHECK_THROWS_WITH(ck::save(dir, 1, 0, 1, s), Catch::Contains("\"x\"") && Catch::Contains("8 floats"));
  s.pieces[0] = ck::whole_tensor("x", {3, 3}, std::vector<float>(9));
  s.pieces[0].offset = {1, 0};
  CHECK_THROWS_WITH(ck::save(dir, 1, 0, 1, s), Catch::Contains("outside the global tensor"));
  s.common.reset();
  s.pieces[0].offset = {0, 0};
  CHECK_THROWS_WITH(ck::save(dir, 1, 0, 1, s), Catch::Contains("common document"));
  CHECK_FALSE(ck::read_tracker(dir).has_value());
}

TEST_CASE("rank 0 gives up on a rank that never finishes, names it, and leaves the tracker alone") {
  const auto dir = ck::test::scratch_dir("timeout").string();
  ck::rank_state s0;
  s0.common = nlohmann::json::object();
  s0.pieces.push_back(ck::whole_tensor("x", {2}, {1.0f, 2.0f}));
  ck::save(dir, 1, 0, 1, s0);
  ck::save_options o;
  o.commit_timeout = std::chrono::milliseconds(200);
  CHECK_THROWS_WITH(ck::save(dir, 2, 0, 3, s0, o), Catch::Contains("rank(s) 1, 2"));
  CHECK(ck::read_tracker(dir) == 1);
  CHECK(ck::checkpoint_reader(dir).read_whole("x") == std::vector<float>{1.0f, 2.0f});
  CHECK(ck::remove_interrupted_saves(dir) == 1);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(dir) / "iter_0000002.tmp"));
}

TEST_CASE("the tracker reads Megatron's text, reports no checkpoint as empty, and rejects garbage and release") {
  const auto dir = ck::test::scratch_dir("tracker");
  CHECK_FALSE(ck::read_tracker(dir.string()).has_value());
  CHECK_FALSE(ck::read_tracker((dir / "nowhere").string()).has_value());
  ck::write_tracker(dir.string(), 1500);
  CHECK(ck::read_tracker(dir.string()) == 1500);
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << "  42\n";
  CHECK(ck::read_tracker(dir.string()) == 42);
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << "4x2";
  CHECK_THROWS_WITH(ck::read_tracker(dir.string()),
                    Catch::Contains("latest_checkpointed_iteration.txt") && Catch::Contains("4x2"));
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << "release\n";
  CHECK_THROWS_WITH(ck::read_tracker(dir.string()), Catch::Contains("release checkpoints are not supported"));
  CHECK(ck::iteration_dir_name(100) == "iter_0000100");
}
