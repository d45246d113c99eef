// --check-weight-hash-across-dp-replicas-interval: the hash comparison over replicas (simulated
// here by summing their vectors) finds exactly the parameters that differ, and a DP2 job prints
// Megatron's ">>> Weight hashes match" line at each interval; with --data-parallel-random-init
// the replicas stay equal and the losses are those of the job without it.
#include "training/weight_hash_check.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <regex>
#include <vector>

#include "tests/training/launch_support.hpp"

using namespace mactor;

namespace {

// Every replica's view of the sums: `replicas` holds each replica's hashes.
std::vector<std::size_t> compare_as(std::size_t me, const std::vector<std::vector<std::uint64_t>>& replicas) {
  return training::differing_hashes(replicas[me], int(replicas.size()), [&](std::span<double> v) {
    std::fill(v.begin(), v.end(), 0.0);
    for (const auto& r : replicas) {
      const auto moments = training::hash_part_moments(r);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] += moments[i];
    }
  });
}

}  // namespace

TEST_CASE("weight hashes: equal replicas agree, and a parameter that differs on one replica is found by every replica") {
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> hashes(50);
  for (auto& h : hashes) h = rng();
  const std::vector<std::vector<std::uint64_t>> same(4, hashes);
  for (std::size_t me = 0; me < 4; ++me) CHECK(compare_as(me, same).empty());
  auto differ = same;
  differ[2][17] ^= 1ull << 40;  // one bit of one parameter on one replica
  differ[3][5] = hashes[6];     // another parameter's hash in its place
  for (std::size_t me = 0; me < 4; ++me) CHECK(compare_as(me, differ) == std::vector<std::size_t>{5, 17});
  std::vector<float> a(100, 1.0f), b = a;
  b[99] = std::nextafter(1.0f, 2.0f);
  CHECK(training::fnv1a_hash(tensor::view_of(std::span<float>(a))) != training::fnv1a_hash(tensor::view_of(std::span<float>(b))));
}

TEST_CASE("a DP2 job with the weight-hash check prints Megatron's match line at each interval") {
  const auto r = test::run_shell(
      test::mactor_bin() + " -np 2 --oversubscribe " + test::bin_dir() +
      "/pretrain_gpt --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 "
      "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 "
      "--tokenizer-type NullTokenizer --vocab-size 4095 --eval-iters 0 --use-distributed-optimizer "
      "--overlap-grad-reduce --overlap-param-gather --check-weight-hash-across-dp-replicas-interval 2");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::regex line(R"(>>> Weight hashes match after (\d+) iterations\.\.\.)");
  std::vector<std::string> at;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it)
    at.push_back((*it)[1].str());
  CHECK(at == std::vector<std::string>{"2", "4"});
}

// Megatron's --data-parallel-random-init seeds each replica's initialization differently and then
// broadcasts replica 0's parameters, so replicas start (and stay) equal, at the weights the job
// has without the flag; mactor accepts it without effect: the same losses, bit for bit, with dropout.
TEST_CASE("a DP2 job with --data-parallel-random-init keeps equal replicas and the losses of the job without it") {
  const std::string job = test::mactor_bin() + " -np 2 --oversubscribe " + test::bin_dir() +
      "/pretrain_gpt --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 "
      "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 3 --lr 1e-3 "
      "--tokenizer-type NullTokenizer --vocab-size 4095 --eval-iters 0 --hidden-dropout 0.1 --log-interval 1 "
      "--check-weight-hash-across-dp-replicas-interval 1";
  auto losses = [](const std::string& out) {
    const std::regex loss(R"(lm loss: ([0-9.E+-]+))");
    std::vector<std::string> v;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), loss); it != std::sregex_iterator(); ++it)
      v.push_back((*it)[1].str());
    return v;
  };
  const auto plain = test::run_shell(job);
  const auto flagged = test::run_shell(job + " --data-parallel-random-init");
  INFO(flagged.err);
  REQUIRE(plain.status == 0);
  REQUIRE(flagged.status == 0);
  CHECK(flagged.out.find(">>> Weight hashes match after 3 iterations...") != std::string::npos);
  CHECK(losses(flagged.out).size() == 3);
  CHECK(losses(flagged.out) == losses(plain.out));
}
