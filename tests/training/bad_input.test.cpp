// pretrain_gpt's answers to unusable input: exit status 2 and an error that names the flag or file
// at fault, before any training starts.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/tools/run_command.hpp"
#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_corpus.hpp"

namespace fs = std::filesystem;
using mactor::test::expect_user_error;

namespace {

const std::string model_flags =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32"
    " --micro-batch-size 2 --global-batch-size 8 --train-iters 2 --lr 1e-3 --eval-iters 0";
const std::string null_tokenizer = " --tokenizer-type NullTokenizer --vocab-size 8192";

std::string pretrain_gpt() { return mactor::test::bin_dir() + "/pretrain_gpt"; }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/training/bad_input" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("pretrain_gpt with a --data-path prefix that does not exist exits 2 naming the prefix") {
  const auto missing = (scratch("missing_prefix") / "no_such_corpus_text_document").string();
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --split 1,0,0 --data-path " + missing,
                    {missing, "prefix"});
}

TEST_CASE("pretrain_gpt with a truncated .idx exits 2 naming the index file") {
  const auto prefix = (scratch("truncated_idx") / "corpus").string();
  mactor::test::write_tiny_corpus(prefix);
  const auto idx = prefix + ".idx";
  fs::resize_file(idx, fs::file_size(idx) / 2);
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --split 1,0,0 --data-path " + prefix, {idx});
}

TEST_CASE("pretrain_gpt with a missing --vocab-file exits 2 naming the flag and the path") {
  const auto missing = (scratch("missing_vocab") / "gpt2-vocab.json").string();
  const std::string merges = std::string(MACTOR_SOURCE_DIR) + "/data/corpus/gpt2-merges.txt";
  REQUIRE(fs::exists(merges));
  expect_user_error(pretrain_gpt() + model_flags + " --mock-data --tokenizer-type GPT2BPETokenizer --vocab-file " +
                        missing + " --merge-file " + merges,
                    {"--vocab-file", missing});
}

TEST_CASE("pretrain_gpt with a flag not implemented yet (--num-experts) exits 2 naming it") {
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --mock-data --bf16 --num-experts 4",
                    {"--num-experts", "not implemented"});
}

TEST_CASE("pretrain_gpt alone with --tensor-model-parallel-size 2 exits 2 naming the world size") {
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --mock-data --tensor-model-parallel-size 2",
                    {"world size", "tensor"});
}

TEST_CASE("mactor -np 2 pretrain_gpt with a global batch not divisible by micro batch x data parallel exits 2") {
  expect_user_error(mactor::test::mactor_bin() + " -np 2 " + pretrain_gpt() + model_flags + null_tokenizer +
                        " --mock-data --global-batch-size 6",
                    {"--global-batch-size=6", "--micro-batch-size=2", "data-parallel size 2"});
}

TEST_CASE("pretrain_gpt with a truncated .bin exits 2 naming the data file") {
  const auto prefix = (scratch("truncated_bin") / "corpus").string();
  mactor::test::write_tiny_corpus(prefix);
  fs::resize_file(prefix + ".bin", fs::file_size(prefix + ".bin") / 2);
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --split 1,0,0 --data-path " + prefix,
                    {prefix + ".bin"});
}

TEST_CASE("pretrain_gpt on data whose token ids exceed --vocab-size exits 2 naming --vocab-size") {
  // The corpus holds ids up to 8192; a 100-token NullTokenizer pads the vocabulary to 128 only.
  const auto prefix = (scratch("vocab_too_small") / "corpus").string();
  mactor::test::write_tiny_corpus(prefix);
  expect_user_error(pretrain_gpt() + model_flags + " --tokenizer-type NullTokenizer --vocab-size 100 --split 1,0,0 "
                        "--data-path " + prefix,
                    {"outside the vocabulary", "--vocab-size"});
}

TEST_CASE("pretrain_gpt with --wandb-project but no experiment name or directory exits 2 naming the flag") {
  // (tests/training/wandb_run_check.py runs W&B itself.)
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --mock-data --wandb-project x", {"--wandb-exp-name"});
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --mock-data --wandb-project x --wandb-exp-name y",
                    {"--wandb-save-dir", "--save"});
}

TEST_CASE("mactor -np 2 with rank 1 started with another --pipeline-model-parallel-size exits 2 naming both layouts") {
  // The config message is rank 0's flags; rank 1 built its process groups from its own.
  const auto script = scratch("mixed_layouts") / "rank.sh";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nif [ \"$MACTOR_RANK\" = 1 ]; then exec " << pretrain_gpt() << model_flags << null_tokenizer
        << " --mock-data --global-batch-size 4 --pipeline-model-parallel-size 2; fi\nexec " << pretrain_gpt()
        << model_flags << null_tokenizer << " --mock-data\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  expect_user_error(mactor::test::mactor_bin() + " -np 2 " + script.string(),
                    {"rank 1 was started with another parallel layout than rank 0",
                     "--pipeline-model-parallel-size is 1 in rank 0's flags but 2 in this rank's process groups",
                     "give every rank the same flags"});
}

TEST_CASE("pretrain_gpt with an unwritable --tensorboard-dir exits 2 naming it instead of training without a log") {
  // The logger's writer starts before the job: a logger that cannot start must not leave a job
  // running (and exiting 0) with no log line at all.
  const fs::path blocker = scratch("tensorboard") / "a_file";
  std::ofstream(blocker) << "not a directory";
  expect_user_error(pretrain_gpt() + model_flags + null_tokenizer + " --mock-data --tensorboard-dir " + (blocker / "tb").string(),
                    {"--tensorboard-dir", (blocker / "tb").string()});
  expect_user_error(mactor::test::mactor_bin() + " -np 2 " + pretrain_gpt() + model_flags + null_tokenizer +
                        " --mock-data --tensorboard-dir " + (blocker / "tb").string(),
                    {"--tensorboard-dir", "rank 0"});
}
