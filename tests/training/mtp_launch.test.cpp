// --mtp-num-layers launched with `mactor`: TP2 with sequence parallelism x DP2 with the
// distributed optimizer, PP2 (the depths and the embedding's copy on the last stage) and DP2 log
// the one-process lm loss and each depth's "mtp_<k> loss" (PP2 also with the depths placed by
// --pipeline-model-parallel-layout 'Et|tmmL'); a checkpoint resumes bit for bit
// (the same iteration lines as the uninterrupted run), and one saved by TP2 resumes under PP2.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

std::string model_flags() {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--mtp-num-layers 2 --mtp-loss-scaling-factor 0.3 --normalization RMSNorm --swiglu "
         "--position-embedding-type rope --disable-bias-linear --seq-length 16 --max-position-embeddings 16 "
         "--micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-2 --clip-grad 1.0 --init-method-std 0.05 "
         "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 5";
}

void check_depth_losses(const std::string& one, const std::string& spread, const std::string& layout, int ranks) {
  for (const char* key : {"mtp_1 loss", "mtp_2 loss"}) {
    const auto want = logged_values(one, key);
    REQUIRE(want.size() == 6);
    CHECK(want.front() != want.back());
    const auto got = logged_values(spread, key);
    REQUIRE(got.size() == want.size());
    check_same(got, want, (std::string(key) + ", " + layout).c_str(), ranks);
  }
}

}  // namespace

TEST_CASE("multi-token prediction under TP2 with sequence parallelism x DP2 and PP2 and DP2 logs the one-process losses") {
  const auto alone = launch(1, model_flags());
  const auto one = parse_losses(alone.out);
  REQUIRE(one.train.size() == 6);
  for (const auto& [ranks, layout] : std::vector<std::pair<int, std::string>>{
           {4, "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer"},
           {2, "--pipeline-model-parallel-size 2"},
           {2, "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et|tmmL'"},
           {2, "--use-distributed-optimizer"}}) {
    INFO(layout);
    const auto spread = launch(ranks, model_flags() + " " + layout);
    const auto got = parse_losses(spread.out);
    REQUIRE(got.train.size() == 6);
    check_same(got.train, one.train, ("lm loss, " + layout).c_str(), ranks);
    check_same(got.validation, one.validation, ("validation lm loss, " + layout).c_str(), ranks);
    check_depth_losses(alone.out, spread.out, layout, ranks);
  }
}

TEST_CASE("multi-token prediction with --calculate-per-token-loss under PP2 and DP2 logs the one-process losses") {
  const std::string flags = model_flags() + " --calculate-per-token-loss";
  const auto alone = launch(1, flags);
  const auto one = parse_losses(alone.out);
  REQUIRE(one.train.size() == 6);
  CHECK(one.train != parse_losses(launch(1, model_flags()).out).train);  // per-token scaling moves training
  for (const auto& [ranks, layout] : std::vector<std::pair<int, std::string>>{
           {2, "--pipeline-model-parallel-size 2"}, {2, "--use-distributed-optimizer"}}) {
    INFO(layout);
    const auto spread = launch(ranks, flags + " " + layout);
    const auto got = parse_losses(spread.out);
    REQUIRE(got.train.size() == 6);
    check_same(got.train, one.train, ("per-token lm loss, " + layout).c_str(), ranks);
    check_depth_losses(alone.out, spread.out, layout, ranks);
  }
}

// Context parallelism: each depth's ids, labels and loss mask roll over the whole sequence (Megatron's
// roll_tensor passes the boundary values between the context-parallel ranks). With
// --calculate-per-token-loss the gradients are the one process's sums, so CP2 and TP2 x CP2 log the
// one-process lm loss. Without it, as in Megatron, each context-parallel rank scales its MTP loss by
// its own token count (the rank holding the sequence's end has one token fewer per sequence), and
// the logged mtp losses are the mean of the ranks' means: close to, not equal to, one process's.
TEST_CASE("multi-token prediction under CP2 and TP2 x CP2 logs the one-process losses") {
  for (const std::string extra : {" --calculate-per-token-loss", ""}) {
    const std::string flags = model_flags() + extra;
    const auto alone = launch(1, flags);
    const auto one = parse_losses(alone.out);
    for (const auto& [ranks, layout] : std::vector<std::pair<int, std::string>>{
             {2, "--context-parallel-size 2"},
             {4, "--tensor-model-parallel-size 2 --sequence-parallel --context-parallel-size 2"}}) {
      INFO(layout << extra);
      const auto spread = launch(ranks, flags + " " + layout);
      const auto got = parse_losses(spread.out);
      REQUIRE(got.train.size() == 6);
      check_same(got.train, one.train, ("lm loss, " + layout + extra).c_str(), ranks, extra.empty() ? 2e-3 : 1e-5);
      for (const char* key : {"mtp_1 loss", "mtp_2 loss"})
        check_same(logged_values(spread.out, key), logged_values(alone.out, key), (std::string(key) + ", " + layout + extra).c_str(),
                   ranks, 2e-3);
    }
  }
}

TEST_CASE("a multi-token prediction checkpoint resumes bit for bit and a TP2 one resumes under PP2") {
  const auto whole = iteration_lines(launch(1, model_flags()).out);
  REQUIRE(whole.size() == 6);
  const auto dir = scratch_dir("mtp_launch", "checkpoint");
  launch(1, model_flags() + " --save " + dir.string() + " --save-interval 6 --exit-interval 3");
  const auto resumed = iteration_lines(launch(1, model_flags() + " --load " + dir.string()).out);
  REQUIRE(resumed.size() == 3);
  for (int i = 4; i <= 6; ++i) {
    INFO("iteration " << i);
    REQUIRE(resumed.count(i));
    CHECK(resumed.at(i) == whole.at(i));
    CHECK(resumed.at(i).find("mtp_2 loss") != std::string::npos);
  }
  std::filesystem::remove_all(dir);

  const auto tp_dir = scratch_dir("mtp_launch", "tp2_checkpoint");
  const auto alone = launch(1, model_flags());
  launch(2, model_flags() + " --tensor-model-parallel-size 2 --save " + tp_dir.string() +
                " --save-interval 6 --exit-interval 3");
  const auto pp = launch(2, model_flags() + " --pipeline-model-parallel-size 2 --load " + tp_dir.string());
  const auto got = parse_losses(pp.out).train;
  REQUIRE(got.size() == 3);
  const auto want = parse_losses(alone.out).train;
  check_same(got, std::vector<double>(want.begin() + 3, want.end()), "lm loss resumed from a TP2 checkpoint under PP2", 2);
  const auto depth = logged_values(pp.out, "mtp_1 loss");
  const auto depth_want = logged_values(alone.out, "mtp_1 loss");
  REQUIRE(depth.size() == 3);
  check_same(depth, std::vector<double>(depth_want.begin() + 3, depth_want.end()), "mtp_1 loss resumed under PP2", 2);
  std::filesystem::remove_all(tp_dir);
}

TEST_CASE("multi-token prediction with untied embeddings over PP2 (the last stage's copy of the word table) logs the one-process losses and resumes") {
  // Megatron's GPTModel.shared_embedding_or_output_weight: the MTP stage's embedding copy starts
  // as the first stage's table and their gradients are summed; the output layer stays its own.
  const std::string flags = model_flags() + " --untie-embeddings-and-output-weights";
  const auto alone = launch(1, flags);
  const auto one = parse_losses(alone.out);
  REQUIRE(one.train.size() == 6);
  for (const auto& [ranks, layout] : std::vector<std::pair<int, std::string>>{
           {2, "--pipeline-model-parallel-size 2"},
           {4, "--pipeline-model-parallel-size 2 --use-distributed-optimizer"},
           {4, "--pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel"}}) {
    INFO(layout);
    const auto spread = launch(ranks, flags + " " + layout);
    const auto got = parse_losses(spread.out);
    REQUIRE(got.train.size() == 6);
    check_same(got.train, one.train, ("lm loss, untied, " + layout).c_str(), ranks);
    check_same(got.validation, one.validation, ("validation lm loss, untied, " + layout).c_str(), ranks);
    check_depth_losses(alone.out, spread.out, layout, ranks);
  }
  // A one-process checkpoint (one table) resumes under PP2 (the copy loaded from it) and back.
  const auto dir = scratch_dir("mtp_launch", "untied_checkpoint");
  launch(1, flags + " --save " + dir.string() + " --save-interval 3 --exit-interval 3");
  const auto pp = parse_losses(launch(2, flags + " --pipeline-model-parallel-size 2 --load " + dir.string()).out).train;
  REQUIRE(pp.size() == 3);
  check_same(pp, std::vector<double>(one.train.begin() + 3, one.train.end()), "lm loss, untied, resumed under PP2", 2);
  std::filesystem::remove_all(dir);
}
