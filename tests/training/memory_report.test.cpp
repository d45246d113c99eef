// Megatron's report_memory line and the memory it reports: printed once, after the first logged
// iteration, by every rank of data-parallel rank 0, with allocated memory that holds at least
// the model's parameters, gradients and Adam moments.
#include "training/memory_report.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor;

TEST_CASE("the memory line reads as Megatron's report_memory, in MB with Python's float text") {
  const double mib = 1024.0 * 1024.0;
  const training::rank_memory m{3, true, 1.5 * mib, 2.0 * mib, 100.0 * mib, 100.25 * mib};
  CHECK(training::memory_line(m, 7) ==
        "[Rank 3] (after 7 iterations) memory (MB) | allocated: 1.5 | max allocated: 2.0 | reserved: 100.0 | "
        "max reserved: 100.25");
  const auto now = training::read_rank_memory(0, true);
  CHECK(now.reserved_bytes > 0);
  CHECK(now.max_reserved_bytes >= now.reserved_bytes);
  CHECK(now.max_allocated_bytes >= now.allocated_bytes);
}

TEST_CASE("a PP2 x DP2 job prints the memory of ranks 0 and 2 once, and what they hold is there") {
  // GPT-2 style, tied: 8192 x 64 word and 64 x 64 position embeddings, 2 layers of 12 h^2 + 13 h,
  // the final norm: 628480 parameters, each held 4 times in fp32 (value, gradient, 2 moments).
  const std::string flags =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
      "--micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 2 "
      "--tokenizer-type NullTokenizer --vocab-size 8191 --mock-data --eval-iters 0";
  const auto one = test::run_shell(test::bin_dir() + "/pretrain_gpt " + flags);
  REQUIRE(one.status == 0);
  const std::regex line(
      R"(\[Rank (\d+)\] \(after 2 iterations\) memory \(MB\) \| allocated: ([0-9.e+-]+) \| max allocated: ([0-9.e+-]+) \| reserved: ([0-9.e+-]+) \| max reserved: ([0-9.e+-]+)\n)");
  std::smatch m;
  REQUIRE(std::regex_search(one.out, m, line));
  CHECK(m[1].str() == "0");
  const double allocated = std::stod(m[2].str()), max_allocated = std::stod(m[3].str());
  CHECK(allocated >= 628480.0 * 16 / (1024.0 * 1024.0));
  CHECK(max_allocated >= allocated);
  CHECK(std::stod(m[5].str()) >= std::stod(m[4].str()));

  const auto four = test::run_shell(test::mactor_bin() + " -np 4 --oversubscribe " + test::bin_dir() + "/pretrain_gpt " +
                                    flags + " --pipeline-model-parallel-size 2");
  INFO(four.out.substr(four.out.size() > 3000 ? four.out.size() - 3000 : 0) << four.err);
  REQUIRE(four.status == 0);
  std::vector<std::string> ranks;
  for (auto it = std::sregex_iterator(four.out.begin(), four.out.end(), line); it != std::sregex_iterator(); ++it)
    ranks.push_back((*it)[1].str());
  CHECK(ranks == std::vector<std::string>{"0", "2"});  // data-parallel rank 0 of each stage, once
}
