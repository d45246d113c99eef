// The TensorBoard event writer: CRC32C against published vectors, and its files read back by PyPI
// tensorboard's own loaders (tensorboard_check.py), which re-checks every masked CRC and compares each
// record with what torch.utils.tensorboard.SummaryWriter writes for the same calls.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/tensorboard_writer.hpp"

using namespace mactor;
namespace fs = std::filesystem;

namespace {

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tensorboard_writer_test" / name;
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("crc32c matches the published Castagnoli check vectors") {
  CHECK(training::crc32c("") == 0x00000000u);
  CHECK(training::crc32c("123456789") == 0xE3069283u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, 32 bytes of 0xFF, 0x00..0x1F.
  CHECK(training::crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(training::crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(training::crc32c(ascending) == 0x46DD794Eu);
  // masked = rotate right 15, plus 0xa282ead8 (TFRecord): worked by hand from 0xE3069283.
  const std::uint32_t c = 0xE3069283u;
  CHECK(training::masked_crc32c("123456789") == static_cast<std::uint32_t>(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST_CASE("scalars and texts load back in tensorboard's EventAccumulator exactly and match torch's SummaryWriter byte for byte") {
  const fs::path dir = fresh_dir("scalars");
  const int n = 20;
  nlohmann::json calls = nlohmann::json::array();
  std::string event_file;
  {
    training::tensorboard_writer writer(dir.string());
    event_file = writer.path();
    // Megatron's write_args_to_tensorboard: one text per argument at the starting iteration (0 here).
    writer.add_text("lr", "0.0003", 0, 1.7e9);
    writer.add_text("tokenizer_type", "GPT2BPETokenizer", 0, 1.7e9);
    calls.push_back({"text", "lr", "0.0003", 0, 1.7e9});
    calls.push_back({"text", "tokenizer_type", "GPT2BPETokenizer", 0, 1.7e9});
    for (int step = 1; step <= n; ++step) {
      const double wall = 1.7e9 + 0.25 * step;  // exactly representable, so wall_time round-trips bit for bit
      const double loss = 10.0 / (1.0 + 0.1 * step) + 1e-9;
      const double lr = 3e-4 * step / n;
      const std::int64_t batch = 8 * step;
      const std::int64_t samples = 4 * step * (step + 1);  // consumed samples: sum of batch sizes
      writer.add_scalar("lm loss", loss, step, wall);
      writer.add_scalar("learning-rate", lr, step, wall);
      writer.add_scalar("lm loss vs samples", loss, samples, wall);
      writer.add_scalar("batch-size", static_cast<double>(batch), step, wall);
      calls.push_back({"scalar", "lm loss", loss, step, wall});
      calls.push_back({"scalar", "learning-rate", lr, step, wall});
      calls.push_back({"scalar", "lm loss vs samples", loss, samples, wall});
      calls.push_back({"scalar", "batch-size", batch, step, wall});
    }
  }  // the destructor flushes
  REQUIRE(fs::path(event_file).parent_path() == dir);
  const fs::path expected_path = dir.parent_path() / "scalars_expected.json";
  std::ofstream(expected_path) << nlohmann::json{{"calls", calls}}.dump();
  const std::string command = python() + " " + MACTOR_SOURCE_DIR + "/tests/training/tensorboard_check.py '" +
                              dir.string() + "' '" + expected_path.string() + "'";
  INFO(command);
  CHECK(std::system(command.c_str()) == 0);
}

TEST_CASE("flush makes records readable before the writer closes") {
  const fs::path dir = fresh_dir("flush");
  training::tensorboard_writer writer(dir.string());
  writer.add_scalar("lm loss", 2.5, 7, 1.7e9);
  writer.flush();
  const fs::path expected_path = dir.parent_path() / "flush_expected.json";
  std::ofstream(expected_path) << R"({"calls": [["scalar", "lm loss", 2.5, 7, 1.7e9]]})";
  const std::string command = python() + " " + MACTOR_SOURCE_DIR + "/tests/training/tensorboard_check.py '" +
                              dir.string() + "' '" + expected_path.string() + "'";
  INFO(command);
  CHECK(std::system(command.c_str()) == 0);
}

TEST_CASE("a log directory that cannot be created is an error naming the path") {
  const fs::path dir = fresh_dir("blocked");
  fs::create_directories(dir);
  std::ofstream(dir / "a_file") << "x";
  const std::string bad = (dir / "a_file" / "logs").string();
  CHECK_THROWS_WITH(training::tensorboard_writer(bad), Catch::Contains(bad) && Catch::Contains("--tensorboard-dir"));
}

TEST_CASE("long tags, steps past 2^32, tiny and negative values encode as torch's SummaryWriter encodes them") {
  // Multi-byte varints for the lengths and the step; float32 rounding and underflow of the value.
  const fs::path dir = fresh_dir("varints");
  const std::string long_tag(300, 'x');
  {
    training::tensorboard_writer writer(dir.string());
    writer.add_scalar(long_tag, -1.0 / 3.0, 5'000'000'000LL, 1.7e9);
    writer.add_scalar("tiny", 1e-30, 1, 1.7e9 + 0.5);
    writer.add_scalar("tiny", 1e-50, 128, 1.7e9 + 1.0);
    writer.add_text("long text", std::string(1000, 'y'), 300, 1.7e9);
  }
  const nlohmann::json calls = {{"scalar", long_tag, -1.0 / 3.0, 5'000'000'000LL, 1.7e9},
                                {"scalar", "tiny", 1e-30, 1, 1.7e9 + 0.5},
                                {"scalar", "tiny", 1e-50, 128, 1.7e9 + 1.0},
                                {"text", "long text", std::string(1000, 'y'), 300, 1.7e9}};
  const fs::path expected_path = dir.parent_path() / "varints_expected.json";
  std::ofstream(expected_path) << nlohmann::json{{"calls", calls}}.dump();
  const std::string command = python() + " " + MACTOR_SOURCE_DIR + "/tests/training/tensorboard_check.py '" +
                              dir.string() + "' '" + expected_path.string() + "'";
  INFO(command);
  CHECK(std::system(command.c_str()) == 0);
}
