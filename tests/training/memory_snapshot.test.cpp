// --record-memory-history / --memory-snapshot-path: the pickle writer read back by Python's
// pickle, a recorded history replayed against its own segments (and summed by torch's
// _memory_viz), and pretrain_gpt writing a snapshot a user can open.
#include "training/memory_snapshot.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tensor/memory_history.hpp"
#include "tensor/tensor.hpp"
#include "tests/training/launch_support.hpp"
#include "training/pickle_writer.hpp"

using namespace mactor;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/memory_snapshot";
  fs::create_directories(dir);
  return dir / name;
}

test::run_result check(const std::string& mode, const fs::path& file, const std::string& more = "") {
  return test::run_shell(std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                         "/tests/training/memory_snapshot_check.py " + mode + " " + file.string() + " " + more);
}

}  // namespace

TEST_CASE("the pickle writer's integers, strings, lists, dicts and tuples read back in Python as written") {
  training::pickle_writer w;
  w.begin_dict();
  w.key("small").begin_list();
  for (std::int64_t v : std::initializer_list<std::int64_t>{0, 1, 255, 256, -1, -(1LL << 31), (1LL << 31) - 1}) w.integer(v);
  w.end_list();
  w.key("large").begin_list();
  for (std::int64_t v : std::initializer_list<std::int64_t>{1LL << 31, -(1LL << 31) - 1, 1LL << 40, -(1LL << 40), INT64_MAX, INT64_MIN})
    w.integer(v);
  w.end_list();
  w.key("unsigned").begin_list().unsigned_integer(1ULL << 63).unsigned_integer(UINT64_MAX).end_list();
  w.key("text").begin_list().text("").text("plain").text("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80").end_list();
  w.key("nested").begin_dict();
  w.key("empty_list").begin_list().end_list();
  w.key("empty_dict").begin_dict().end_dict();
  w.key("tuple").begin_tuple().integer(0).integer(0).end_tuple();
  w.key("bools").begin_list().boolean(true).boolean(false).none().end_list();
  w.end_dict();
  w.end_dict();
  const auto file = scratch("values.pickle");
  std::ofstream(file, std::ios::binary) << w.finish();
  const auto r = check("values", file);
  INFO(r.out << r.err);
  CHECK(r.status == 0);
}

TEST_CASE("a recorded history replays to the snapshot's live blocks, which torch's _memory_viz sums") {
  tensor::start_memory_history();
  std::int64_t active = 0;
  {
    tensor::tensor params({1000}, tensor::dtype::float32, tensor::memory_kind::parameters);
    tensor::tensor kept({256, 64}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
    { tensor::tensor freed({300}, tensor::dtype::float32, tensor::memory_kind::gradients); }
    active = std::int64_t(params.nbytes() + kept.nbytes());
    const auto file = scratch("history.pickle");
    training::write_memory_snapshot(file);
    const auto r = check("snapshot", file, std::to_string(active) + " parameters activations");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    const auto s = tensor::take_memory_history_snapshot();
    CHECK(s.trace.size() == 4);  // three allocations and one free
    CHECK(s.active.size() == 2);
  }
  // A snapshot that leaves out a freed block, or keeps one, fails the check: the check can fail.
  const auto file = scratch("history_after.pickle");
  training::write_memory_snapshot(file);
  const auto r = check("snapshot", file, std::to_string(active));
  CHECK(r.status != 0);
  tensor::stop_memory_history();
}

TEST_CASE("pretrain_gpt --record-memory-history writes a snapshot at each log interval, and refuses an unwritable path") {
  const std::string flags =
      " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 "
      "--micro-batch-size 2 --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 2 --bf16 "
      "--tokenizer-type NullTokenizer --vocab-size 4095 --mock-data --eval-iters 0 --record-memory-history";
  const auto file = scratch("pretrain_gpt.pickle");
  fs::remove(file);
  const auto run = test::run_shell(test::bin_dir() + "/pretrain_gpt" + flags + " --memory-snapshot-path " + file.string());
  INFO(run.err);
  REQUIRE(run.status == 0);
  REQUIRE(fs::exists(file));
  const auto r = check("snapshot", file, "-1 parameters gradients activations");
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  const auto bad = test::run_shell(test::bin_dir() + "/pretrain_gpt" + flags +
                                   " --memory-snapshot-path /nonexistent/folder/snap.pickle");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--memory-snapshot-path") != std::string::npos);
}
