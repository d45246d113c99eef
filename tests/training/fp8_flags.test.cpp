// pretrain_gpt with Megatron's fp8 flags: each recipe trains, close to the bf16 run but not equal
// to it, and each broken fp8 rule exits 2 naming the flag.
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "tests/tools/run_command.hpp"

namespace {

const std::string flags =
    " --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64"
    " --micro-batch-size 4 --global-batch-size 8 --train-iters 20 --lr 1e-3 --mock-data --eval-iters 0"
    " --tokenizer-type NullTokenizer --vocab-size 8192 --log-interval 10 --bf16";

std::string pretrain_gpt() { return mactor::test::bin_dir() + "/pretrain_gpt"; }

// The lm loss of each logged iteration.
std::vector<double> losses(const std::string& extra) {
  const auto r = mactor::test::run_shell(pretrain_gpt() + flags + extra);
  INFO(extra << "\nexit status " << r.status << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  std::vector<double> out;
  const std::regex loss(R"(lm loss: ([0-9.E+-]+))");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), loss), end; it != end; ++it)
    out.push_back(std::stod((*it)[1]));
  REQUIRE(out.size() == 2);
  return out;
}

void expect_user_error(const std::string& extra, std::initializer_list<std::string> named) {
  const auto r = mactor::test::run_shell(pretrain_gpt() + flags + extra);
  INFO(extra << "\nexit status " << r.status << "\nstderr:\n" << r.err);
  CHECK(r.status == 2);
  for (const auto& word : named) {
    INFO("the error should name: " << word);
    CHECK(r.err.find(word) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("pretrain_gpt trains with each fp8 recipe close to its bf16 run") {
  const auto bf16 = losses("");
  for (const std::string extra : {" --fp8-format hybrid", " --fp8-format e4m3 --fp8-amax-history-len 8 --fp8-amax-compute-algo max --fp8-margin 1 --no-fp8-wgrad",
                                  " --fp8-format hybrid --fp8-recipe tensorwise", " --fp8-format e4m3 --fp8-recipe mxfp8",
                                  " --fp8-format hybrid --fp8-recipe blockwise --first-last-layers-bf16"}) {
    const auto fp8 = losses(extra);
    INFO(extra);
    CHECK(fp8[1] < fp8[0]);
    CHECK(fp8 != bf16);
    for (std::size_t i = 0; i < bf16.size(); ++i) CHECK(std::fabs(fp8[i] - bf16[i]) < 0.01 * bf16[i]);
  }
}

TEST_CASE("pretrain_gpt refuses the fp8 rules Megatron enforces, naming the flag") {
  expect_user_error(" --fp8-format hybrid --first-last-layers-bf16", {"--first-last-layers-bf16", "--fp8-recipe delayed"});
  expect_user_error(" --fp8-format hybrid --fp8-recipe mxfp8 --first-last-layers-bf16 --num-layers-at-start-in-bf16 5",
                    {"--num-layers-at-start-in-bf16=5", "[0, 4]"});
  expect_user_error(" --fp8-format hybrid --fp8-recipe tensorwise --first-last-layers-bf16 --num-layers-at-end-in-bf16 -1",
                    {"--num-layers-at-end-in-bf16=-1"});
  expect_user_error(" --fp8-format hybrid --fp4-format e2m1", {"--fp4-format"});
  expect_user_error(" --fp8-format hybrid --fp8-param-gather", {"--fp8-param-gather", "--use-distributed-optimizer"});
  expect_user_error(" --fp8-format e4m3 --fp8-recipe mxfp8 --fp8-param-gather --use-distributed-optimizer",
                    {"--fp8-param-gather", "--fp8-recipe mxfp8", "not implemented"});
  expect_user_error(" --fp8-format e5m2", {"--fp8-format", "e5m2"});
}
