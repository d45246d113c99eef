// The log writer's timers block: every rank's seconds summed over the log interval, printed after
// the training line in Megatron's timers.log format (written out here by hand from timers.py), in
// training_log's timer order, and started anew each interval.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "tests/tools/run_command.hpp"
#include "training/log_writer.hpp"
#include "training/step_timers.hpp"

using namespace mactor;
using training::step_timer;

namespace {

config::megatron_args args_with(const std::string& extra) {
  std::vector<std::string> flags = {"--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
                                    "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
                                    "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-3", "--mock-data",
                                    "--tokenizer-type", "NullTokenizer", "--vocab-size", "8192", "--log-interval", "2"};
  for (std::size_t at = 0; at < extra.size();) {
    const auto end = extra.find(' ', at);
    flags.push_back(extra.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? extra.size() : end + 1;
  }
  auto r = config::resolve(flags, "pretrain_gpt", {0, 2});
  INFO(r.err);
  REQUIRE_FALSE(r.exit_status.has_value());
  return r.args;
}

// One iteration's report with per-rank seconds for a few timers (the others zero).
training::iteration_report report(std::int64_t iteration,
                                  const std::vector<std::vector<std::pair<step_timer, double>>>& by_rank) {
  training::iteration_report r;
  r.iteration = iteration;
  r.has_loss = true;
  r.loss_sum = 7.0;
  r.num_tokens = 1.0;
  for (std::size_t rank = 0; rank < by_rank.size(); ++rank) {
    training::rank_timings t{static_cast<int>(rank), std::vector<double>(training::num_step_timers, 0.0)};
    for (const auto& [timer, seconds] : by_rank[rank]) t.seconds[static_cast<std::size_t>(timer)] = seconds;
    r.timings.push_back(t);
  }
  return r;
}

// Everything the writer printed for the given reports.
std::string printed(const config::megatron_args& args, const std::vector<training::iteration_report>& reports) {
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  {
    training::log_writer w(args, out, 2, 8192);
    std::int64_t consumed = 0;
    for (const auto& r : reports) w.iteration(r, consumed += 4);
  }
  std::rewind(out);
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) text.append(buf, n);
  std::fclose(out);
  return text;
}

// The lines after each training line, up to the next one.
std::vector<std::string> blocks(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = text.find("| number of nan iterations:", at)) != std::string::npos) {
    const auto start = text.find('\n', at) + 1;
    auto end = text.find(" [", start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    at = start;
  }
  return out;
}

// Two ranks, four iterations, interval 2: rank 0 runs forward-backward for 10 ms and the
// optimizer for 1 ms each iteration, rank 1 for 30 ms and 3 ms, and rank 1 alone waits 5 ms
// for its input in iteration 3.
std::vector<training::iteration_report> two_ranks() {
  std::vector<training::iteration_report> reports;
  for (int i = 1; i <= 4; ++i) {
    std::vector<std::pair<step_timer, double>> rank1 = {{step_timer::optimizer, 0.003},
                                                        {step_timer::forward_backward, 0.030}};
    if (i == 3) rank1.push_back({step_timer::forward_recv, 0.005});
    reports.push_back(report(i, {{{step_timer::forward_backward, 0.010}, {step_timer::optimizer, 0.001}}, rank1}));
  }
  return reports;
}

}  // namespace

TEST_CASE("the timers block follows each training line with the min and max over ranks per iteration in ms") {
  const auto b = blocks(printed(args_with("--timing-log-level 2"), two_ranks()));
  REQUIRE(b.size() == 2);
  CHECK(b[0] ==
        "(min, max) time across ranks (ms):\n"
        "    forward-backward ...............................: (10.00, 30.00)\n"
        "    optimizer ......................................: (1.00, 3.00)\n");
  // The second interval starts from zero; a timer only one rank ran gives that rank's value twice.
  CHECK(b[1] ==
        "(min, max) time across ranks (ms):\n"
        "    forward-backward ...............................: (10.00, 30.00)\n"
        "    forward-recv ...................................: (2.50, 2.50)\n"
        "    optimizer ......................................: (1.00, 3.00)\n");
}

TEST_CASE("the timing log options max and all print Megatron's other two layouts") {
  const auto max = blocks(printed(args_with("--timing-log-level 1 --timing-log-option max"), two_ranks()));
  REQUIRE(max.size() == 2);
  CHECK(max[0] ==
        "max time across ranks (ms):\n"
        "    forward-backward ...............................: 30.00\n"
        "    optimizer ......................................: 3.00\n");
  const auto all = blocks(printed(args_with("--timing-log-level 1 --timing-log-option all"), two_ranks()));
  REQUIRE(all.size() == 2);
  CHECK(all[1] ==
        "times across ranks (ms):\n"
        "  forward-backward:\n"
        "     rank  0: 10.00\n"
        "     rank  1: 30.00\n"
        "  forward-recv:\n"
        "     rank  1: 2.50\n"
        "  optimizer:\n"
        "     rank  0: 1.00\n"
        "     rank  1: 3.00\n");
}

TEST_CASE("without timings in the reports (timing log level 0) nothing follows the training line") {
  auto reports = two_ranks();
  for (auto& r : reports) r.timings.clear();
  const auto b = blocks(printed(args_with(""), reports));
  REQUIRE(b.size() == 2);
  CHECK(b[0].empty());
  CHECK(b[1].empty());
}

TEST_CASE("the timers come in training_log's order whatever order the ranks report them in") {
  std::vector<std::pair<step_timer, double>> every;
  for (std::size_t t = 0; t < training::num_step_timers; ++t) every.push_back({static_cast<step_timer>(t), 0.001});
  const std::vector<training::iteration_report> reports = {report(1, {every}), report(2, {every})};
  const auto b = blocks(printed(args_with("--timing-log-level 2"), reports));
  REQUIRE(b.size() == 1);
  std::vector<std::string> names;
  for (std::size_t at = b[0].find("\n    "); at != std::string::npos; at = b[0].find("\n    ", at + 1))
    names.push_back(b[0].substr(at + 5, b[0].find(' ', at + 5) - at - 5));
  // timers_to_log in training.py (core_v0.15.0), less the timers mactor does not keep.
  const std::vector<std::string> want = {"forward-backward", "forward-compute", "backward-compute",
                                         "forward-recv", "backward-recv", "embedding-grads-all-reduce",
                                         "all-grads-sync", "params-all-gather", "optimizer-copy-to-main-grad",
                                         "optimizer-unscale-and-check-inf", "optimizer-clip-main-grad",
                                         "optimizer-count-zeros", "optimizer-inner-step",
                                         "optimizer-copy-main-to-model-params", "optimizer"};
  CHECK(names == want);
}

TEST_CASE("step timers keep only the timers at or below the log level, as Megatron's dummy timers") {
  training::step_timers level1(1);
  level1.add(step_timer::forward_backward, 0.5);
  level1.add(step_timer::forward_compute, 0.25);  // level 2
  level1.add(step_timer::forward_backward, 0.5);
  auto got = level1.take();
  REQUIRE(got.size() == training::num_step_timers);
  CHECK(got[static_cast<std::size_t>(step_timer::forward_backward)] == 1.0);
  CHECK(got[static_cast<std::size_t>(step_timer::forward_compute)] == 0.0);
  CHECK(level1.take()[0] == 0.0);  // taken means reset
  training::step_timers level0(0);
  level0.add(step_timer::forward_backward, 0.5);
  CHECK(level0.take().empty());
  CHECK(training::step_timer_name(step_timer::all_grads_sync) == "all-grads-sync");
  CHECK(training::step_timer_level(step_timer::backward_recv) == 2);
}

TEST_CASE("a timers block of its own ('evaluate') prints every rank's seconds as ms without a normalizer") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  {
    training::log_writer w(args_with("--timing-log-option minmax"), out, 2, 8192);
    w.timers({"evaluate"}, {{1, {2.0}}, {0, {1.5}}});
    w.timers({"evaluate"}, {});  // nothing timed: nothing printed
  }
  std::rewind(out);
  char buf[512] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, out);
  std::fclose(out);
  CHECK(std::string(buf, n) ==
        "(min, max) time across ranks (ms):\n"
        "    evaluate .......................................: (1500.00, 2000.00)\n");
}
