// --no-one-logger and the one_logger flags: Megatron's last rank imports NVIDIA's internal
// one_logger package, which PyPI does not have; where it is missing Megatron prints a warning and
// trains on. mactor behaves as Megatron without the package: the last rank warns, --no-one-logger
// silences it, the other one_logger flags are accepted without effect.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

const std::string flags =
    "--mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 "
    "--micro-batch-size 1 --global-batch-size 2 --train-iters 2 --lr 1e-3 --tokenizer-type NullTokenizer "
    "--vocab-size 8192 --eval-iters 0 --log-interval 1";
const std::string warning = "WARNING: one_logger package is required to enable e2e metrics tracking.";

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("the last rank warns that the one_logger package is missing unless no-one-logger is given") {
  const auto two = run_shell(mactor_bin() + " -np 2 --tag-output " + bin_dir() + "/pretrain_gpt " + flags);
  INFO(two.out << two.err);
  REQUIRE(two.status == 0);
  CHECK(count(two.out, warning) == 1);
  CHECK(std::regex_search(two.out, std::regex(R"(\[1,1\]<stdout>:WARNING: one_logger package is required)")));
  const auto quiet = launch(2, flags + " --no-one-logger --one-logger-project p --one-logger-run-name r --one-logger-async "
                                       "--app-tag-run-name a --app-tag-run-version 1.0");
  CHECK(count(quiet.out, warning) == 0);
  CHECK(parse_losses(quiet.out).train.size() == 2);
  CHECK(quiet.err.find("--one-logger-project is accepted without effect") != std::string::npos);
}
