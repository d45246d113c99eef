// What the Hugging Face conversion tests (hf_mixtral, hf_moe_families) share: running pretrain_gpt
// and convert_checkpoint with their output on failure, the import's tensors compared bitwise with
// the saved model's, and the validation loss pretrain_gpt --skip-train logs from a checkpoint.
#pragma once
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint_test_util.hpp"
#include "tests/tools/run_command.hpp"

namespace mactor::checkpoint::test {

/// The flags as shell words, each quoted ('[0,1]' is a shell pattern unquoted).
inline std::string shell_words(const std::vector<std::string>& flags) {
  std::string s;
  for (const auto& f : flags) s += " '" + f + "'";
  return s;
}

/// Runs the command and requires status 0, showing the command and its output otherwise.
inline mactor::test::run_result run_checked(const std::string& command) {
  auto r = mactor::test::run_shell(command);
  INFO(command << "\nstdout tail:\n" << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0)
               << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  return r;
}

/// The project's virtual environment's python (PyTorch, safetensors, transformers), else the system's.
inline std::string python() {
  const std::filesystem::path venv = std::filesystem::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return std::filesystem::exists(venv) ? venv.string() : "/usr/bin/python3";
}

inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The checkpoint's tensor names without the optimizer state.
inline std::vector<std::string> model_names(const checkpoint_reader& r) {
  std::vector<std::string> out;
  for (const auto& n : r.names())
    if (n.rfind("optimizer.", 0) != 0) out.push_back(n);
  return out;
}

/// from-hf's import holds exactly the saved model's tensors, bit for bit.
inline void check_import_bitwise(const checkpoint_reader& original, const checkpoint_reader& imported) {
  CHECK(model_names(original) == imported.names());
  for (const auto& name : model_names(original)) {
    INFO(name);
    CHECK(bitwise_equal(original.read_whole(name), imported.read_whole(name)));
  }
}

/// The "lm loss value: X" of pretrain_gpt --skip-train with these flags, loading `load` as a
/// finetune start (no optimizer, no RNG state).
inline std::string skip_train_loss(std::vector<std::string> flags, const std::filesystem::path& load) {
  for (const char* extra : {"--skip-train", "--finetune", "--no-load-optim", "--no-load-rng"}) flags.push_back(extra);
  const auto log =
      run_checked(mactor::test::bin_dir() + "/pretrain_gpt" + shell_words(flags) + " --load " + load.string()).out;
  const auto at = log.find("lm loss value: ");
  REQUIRE(at != std::string::npos);
  return log.substr(at, log.find(' ', at + 15) - at);
}

}  // namespace mactor::checkpoint::test
