// --iterations-to-skip (and the tracker file that extends it), --data-args-path,
// --per-split-data-args-path and --ddp-num-buckets, end to end through pretrain_gpt.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_corpus.hpp"

using namespace mactor::test;

namespace {

std::string flags(const std::string& lr) {
  return "--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 6 " + lr +
         " --init-method-std 0.1 --tokenizer-type NullTokenizer --vocab-size 8192 --hidden-dropout 0 "
         "--attention-dropout 0 --log-interval 1 --eval-interval 100 --eval-iters 0 --seed 7";
}

const std::string schedule = "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 3";

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// Megatron's " skipped samples: {:12d} |" field, every line that has it.
std::vector<double> skipped_samples(const std::string& log) {
  std::vector<double> v;
  static const std::regex field(R"(\| skipped samples: +(\d+) \|)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), field); it != std::sregex_iterator(); ++it)
    v.push_back(std::stod((*it)[1].str()));
  return v;
}

}  // namespace

TEST_CASE("iterations listed by iterations-to-skip consume their batch without training or stepping the LR") {
  // With --lr 0 nothing moves, so each logged loss is the first weights' loss on that iteration's
  // batch: the skipping run must log the plain run's losses of iterations 1 2 4 6 (3 and 5 skipped).
  const auto frozen = launch(1, flags("--lr 0") + " --mock-data");
  const auto frozen_skip = launch(1, flags("--lr 0") + " --mock-data --iterations-to-skip 2 4");
  const auto plain = iteration_lines(frozen.out), skipping = iteration_lines(frozen_skip.out);
  REQUIRE(plain.size() == 6);
  REQUIRE(skipping.size() == 4);
  CHECK_FALSE(skipping.count(3));
  CHECK_FALSE(skipping.count(5));
  const auto lm_plain = logged_values(frozen.out, "lm loss"), lm_skip = logged_values(frozen_skip.out, "lm loss");
  REQUIRE(lm_skip.size() == 4);
  CHECK(lm_skip == std::vector<double>{lm_plain[0], lm_plain[1], lm_plain[3], lm_plain[5]});
  // Consumed samples count the skipped batches; Megatron's "skipped samples:" appears once > 0.
  CHECK(std::regex_search(frozen_skip.out, std::regex(R"(iteration +4/ +6 \| consumed samples: +16 \|)")));
  CHECK(skipped_samples(frozen_skip.out) == std::vector<double>{4, 8});
  CHECK(frozen.out.find("skipped samples") == std::string::npos);

  // The skipped iteration does not step the scheduler: iteration 4's learning rate is the plain
  // run's iteration 3 rate (warmup still rising), iteration 6's the plain run's 4.
  const auto lr_plain = logged_values(launch(1, flags(schedule) + " --mock-data").out, "learning rate");
  const auto lr_skip = logged_values(launch(1, flags(schedule) + " --mock-data --iterations-to-skip 2 4").out, "learning rate");
  REQUIRE(lr_plain.size() == 6);
  REQUIRE(lr_skip.size() == 4);
  CHECK(lr_skip == std::vector<double>{lr_plain[0], lr_plain[1], lr_plain[2], lr_plain[3]});
}

TEST_CASE("skipped samples survive a checkpoint and the tracker file adds iterations to skip") {
  const auto dir = scratch_dir("skips", "resume");
  const auto ckpt = (dir / "ckpt").string();
  std::filesystem::create_directories(dir);
  launch(1, flags(schedule) + " --mock-data --iterations-to-skip 1 --save " + ckpt + " --save-interval 3 --exit-interval 3");
  const auto resumed = launch(1, flags(schedule) + " --mock-data --load " + ckpt);
  CHECK(skipped_samples(resumed.out) == std::vector<double>{4, 4, 4});

  // Iteration 4 reproducibly wrong on rank 0 in two jobs: skipped (the loop's count 4: logged 5).
  // Iteration 2 wrong on two ranks of one job: not skipped (Megatron blames no single rank).
  const auto tracker = dir / "tracker.txt";
  const std::string row = "ts=1 node=n device=0 jobID=";
  write_file(tracker, row + "a rank=0 iteration=4 status=RerunValidationStatus.FIRST_RERUN_REPRODUCIBLE result=1 message=m\n" +
                          row + "b rank=0 iteration=4 status=RerunValidationStatus.SECOND_RERUN_REPRODUCIBLE result=1 message=m\n" +
                          row + "a rank=0 iteration=2 status=RerunValidationStatus.RERUN_DISABLED result=1 message=m\n" +
                          row + "a rank=1 iteration=2 status=RerunValidationStatus.RERUN_DISABLED result=1 message=m\n" +
                          row + "a rank=0 iteration=2 status=RerunValidationStatus.RERUN_DISABLED result=1 message=m\n");
  const auto tracked = launch(1, flags("--lr 0") + " --mock-data --result-rejected-tracker-filename " + tracker.string());
  CHECK(tracked.err.find("Will skip these iterations from tracker file: [4]") != std::string::npos);
  CHECK(tracked.err.find("Will not skip these iterations due to multiple rank errors: [2]") != std::string::npos);
  const auto lines = iteration_lines(tracked.out);
  CHECK(lines.size() == 5);
  CHECK_FALSE(lines.count(5));
  std::filesystem::remove_all(dir);
}

TEST_CASE("data-args-path and per-split-data-args-path train as the same words given on the command line") {
  const auto dir = scratch_dir("skips", "data_args");
  std::filesystem::create_directories(dir);
  const auto a = (dir / "a").string(), b = (dir / "b").string();
  write_tiny_corpus(a);
  write_tiny_corpus(b, 1500);
  const std::string common = flags(schedule) + " --eval-iters 1 --eval-interval 3 --split 90,10,0 --data-cache-path " + (dir / "cache").string();
  const auto direct = run_job(1, common + " --data-path 30 " + a + " 70 " + b, 3);
  write_file(dir / "args.txt", "30 " + a + "\n70\t" + b + "\n");
  const auto from_file = run_job(1, common + " --data-args-path " + (dir / "args.txt").string(), 3);
  check_same(from_file.train, direct.train, "lm loss (--data-args-path)", 1);
  check_same(from_file.validation, direct.validation, "validation lm loss (--data-args-path)", 1);

  const std::string split_flags = flags(schedule) + " --eval-iters 1 --eval-interval 3 --data-cache-path " + (dir / "cache").string();
  const auto per_split = run_job(1, split_flags + " --train-data-path 30 " + a + " 70 " + b + " --valid-data-path " + b +
                                        " --test-data-path " + a, 4);
  write_file(dir / "splits.json", "{\"train\": [30, \"" + a + "\", \"70\", \"" + b + "\"], \"valid\": \"" + b +
                                      "\", \"test\": [\"" + a + "\"]}");
  const auto per_split_file = run_job(1, split_flags + " --per-split-data-args-path " + (dir / "splits.json").string(), 4);
  check_same(per_split_file.train, per_split.train, "lm loss (--per-split-data-args-path)", 1);
  check_same(per_split_file.validation, per_split.validation, "validation/test lm loss (--per-split-data-args-path)", 1);

  // Bad files are named with the fix; both data sources at once is a user error.
  auto bad = launch(1, common + " --data-args-path " + (dir / "missing.txt").string(), 2);
  CHECK(bad.err.find("--data-args-path " + (dir / "missing.txt").string() + ": cannot open it") != std::string::npos);
  write_file(dir / "no_test.json", "{\"train\": \"" + a + "\", \"valid\": null}");
  bad = launch(1, split_flags + " --per-split-data-args-path " + (dir / "no_test.json").string(), 2);
  CHECK(bad.err.find("\"test\" is missing") != std::string::npos);
  bad = launch(1, common + " --data-path " + a + " --data-args-path " + (dir / "args.txt").string(), 2);
  CHECK(bad.err.find("mutually exclusive") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("ddp-num-buckets sizes the overlapped buckets and keeps the one-process losses") {
  const std::string f = flags(schedule) + " --mock-data --global-batch-size 8";
  const auto alone = run_job(1, f, 0);
  const auto bucketed = run_job(2, f + " --overlap-grad-reduce --ddp-num-buckets 5", 0);
  check_same(bucketed.train, alone.train, "lm loss (--ddp-num-buckets 5)", 2);
  const auto both = launch(1, f + " --ddp-num-buckets 2 --ddp-bucket-size 1000", 2);
  CHECK(both.err.find("Cannot specify both --ddp-num-buckets and --ddp-bucket-size") != std::string::npos);
  CHECK(launch(1, f + " --ddp-num-buckets 0", 2).err.find("--ddp-num-buckets must be greater than 0") != std::string::npos);
}
