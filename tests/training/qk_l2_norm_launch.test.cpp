// --qk-l2-norm launched with `mactor` on the tiny GQA/RoPE GPT (dropout on): TP2, PP2 and
// CP2 x TP2 with sequence parallelism each log the one-process lm loss every iteration (fp32,
// relative difference <= 1e-5) and the same validation loss; pretrain_gpt refuses it with MLA.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_cp_flags.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 6;

std::string model_flags() { return tiny_cp_flags() + " --qk-l2-norm"; }

const logged_losses& alone() {
  static const logged_losses one = run_job(1, model_flags(), 4, iterations);
  return one;
}

}  // namespace

TEST_CASE("qk-l2-norm under TP2 and PP2 logs the one-process losses") {
  check_layout_against(alone(), 2, model_flags(), "--tensor-model-parallel-size 2", 4, iterations);
  check_layout_against(alone(), 2, model_flags(), "--pipeline-model-parallel-size 2", 4, iterations);
}

TEST_CASE("qk-l2-norm under CP2 x TP2 with sequence parallelism logs the one-process losses") {
  check_layout_against(alone(), 4, model_flags(),
                       "--context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel", 4, iterations);
}

TEST_CASE("qk-l2-norm changes the losses of the same job without it") {
  const auto plain = run_job(1, tiny_cp_flags(), 4, iterations);
  bool differs = false;
  for (std::size_t i = 0; i < plain.train.size() && i < alone().train.size(); ++i)
    differs = differs || plain.train[i] != alone().train[i];
  CHECK(differs);
}
