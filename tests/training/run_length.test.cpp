// How long pretrain_gpt trains: --exit-interval, --skip-train, and Python's "0 means off".
#include <catch2/catch.hpp>
#include <string>

#include "tests/tools/run_command.hpp"

namespace {

const std::string flags =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32"
    " --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --lr 1e-3 --log-interval 1 --eval-iters 1"
    " --mock-data --tokenizer-type NullTokenizer --vocab-size 8192";

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

mactor::test::run_result pretrain(const std::string& extra) {
  const auto r = mactor::test::run_shell(mactor::test::bin_dir() + "/pretrain_gpt" + flags + extra);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return r;
}

}  // namespace

TEST_CASE("pretrain_gpt with --exit-interval stops at the first multiple and says so as Megatron's print_datetime") {
  const auto r = pretrain(" --exit-interval 4");
  CHECK(count(r.out, "| lm loss: ") == 4);
  CHECK(r.out.find("[exiting program at iteration 4] datetime: ") != std::string::npos);
  // Megatron's train() exits the program there: no final evaluation and no "after training".
  CHECK(r.out.find("on validation set") == std::string::npos);
  CHECK(r.out.find("after training is done") == std::string::npos);
}

TEST_CASE("pretrain_gpt treats --exit-interval 0 and --exit-duration-in-mins 0 as off, as Python's truthiness does") {
  const auto r = pretrain(" --exit-interval 0 --exit-duration-in-mins 0");
  CHECK(count(r.out, "| lm loss: ") == 6);
  CHECK(r.out.find("exiting program") == std::string::npos);
}

TEST_CASE("pretrain_gpt with --skip-train evaluates the validation and test sets at iteration 0 without training") {
  const auto r = pretrain(" --skip-train");
  CHECK(count(r.out, "| lm loss: ") == 0);
  CHECK(r.out.find("skipping training (--skip-train is on) ...") != std::string::npos);
  CHECK(r.out.find("validation loss at iteration 0 on validation set") != std::string::npos);
  CHECK(r.out.find("validation loss at iteration 0 on test set") != std::string::npos);
}
