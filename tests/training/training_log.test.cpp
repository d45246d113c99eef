// Megatron's training log text: the number formats against Python's own str.format, the timers
// block against megatron-core's Timers, and whole log lines and validation blocks against
// strings written out by hand from shared/megatron/log_format.md.
#include "training/training_log.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "../model/optimizer_python_reference.hpp"

using namespace mactor::training;
using mactor::test::run_python_reference;
using nlohmann::json;

namespace {

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::vector<double> format_probe_values() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0, -0.0, 1e-100, 9.9999995e5, 9.9999995e-5, 1.5e-4, 0.5, 1.5, 2.5,
                           0.25, 0.35, 0.125, 0.0625, 1234.55, 1234.65, 7.123456, 999999.5,
                           9.9999999e16, 1e16, 1e15, 123.0, 16777217.0, 1e-5, 1e-4, 0.001,
                           5e-324, 1.7976931348623157e308, 2.2250738585072014e-308, -1.0, -2.5e-7,
                           inf, -inf, std::numeric_limits<double>::quiet_NaN(),
                           static_cast<double>(static_cast<float>(1.5e-4)),
                           static_cast<double>(static_cast<float>(2.3456)), 4.4e-3, 0.0005,
                           0.0015, 0.0025, 99.995, 9.5, 0.95, 0.995};
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> mantissa(1.0, 10.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 3000; ++i) {  // across magnitudes, half of them fp32 values
    double x = mantissa(rng) * std::pow(10.0, exponent(rng)) * (sign(rng) ? -1 : 1);
    if (i % 2) x = static_cast<float>(x);
    v.push_back(x);
  }
  for (int i = 0; i < 1000; ++i) {  // random bit patterns: every exponent, subnormals
    const std::uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    v.push_back(x);
  }
  for (int i = 0; i < 500; ++i) v.push_back(static_cast<double>(rng() % 100000000));  // counts
  return v;
}

}  // namespace

TEST_CASE("number formats equal Python's str.format for the log's specs") {
  const std::vector<double> values = format_probe_values();
  json in = {{"values", json::array()}};
  for (double v : values) in["values"].push_back(hex(v));
  const json ref = run_python_reference("training_log_reference.py", "formats", in, "tests/training");
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const json& want = ref["formats"][i];
    const double v = values[i];
    const std::string got[] = {python_format_exp(v, 6), python_format_fixed(v, 1),
                               python_format_fixed(v, 3), python_format_fixed(v, 2),
                               python_float_repr(v)};
    for (int k = 0; k < 5; ++k) {
      if (got[k] == want[k].get<std::string>()) continue;
      ++mismatches;
      INFO("value " << hex(v) << " format " << k);
      CHECK(got[k] == want[k].get<std::string>());
    }
  }
  std::printf("formats vs Python: %zu values x 5 specs, %zu mismatches\n", values.size(),
              mismatches);
  CHECK(mismatches == 0);
  CHECK(python_format_int(10, 8) == "      10");
  CHECK(python_format_int(123456789, 8) == "123456789");
  CHECK(python_format_int(-5, 3) == " -5");
}

TEST_CASE("the documented example line is reproduced byte for byte") {
  training_log_accumulator acc;
  for (int i = 0; i < 10; ++i) acc.add_iteration(loss_entries{{"lm loss", 7.123456f}}, false);
  training_log_inputs in;
  in.timestamp = "2025-01-01 12:00:00";
  in.iteration = 10;
  in.train_iters = 100;
  in.consumed_train_samples = 320;
  in.interval_seconds = 12.3456;  // 10 iterations: 1234.56 ms each
  in.learning_rate = 1.5e-4;
  in.global_batch_size = 32;
  in.loss_scale = 1.0;
  in.grad_norm = 2.3456;
  CHECK(training_log_interval(in, acc) ==
        " [2025-01-01 12:00:00] iteration       10/     100 | consumed samples:          320 | "
        "elapsed time per iteration (ms): 1234.6 | learning rate: 1.500000E-04 | global batch "
        "size:    32 | lm loss: 7.123456E+00 | loss scale: 1.0 | grad norm: 2.346 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |");
  CHECK(acc.advanced_iterations() == 0);  // reset after printing
}

TEST_CASE("every optional field appears in Megatron's order with its format") {
  training_log_accumulator acc;
  // 3 advanced iterations, 2 skipped (one with a nan loss); a loss key that averages to 0 is
  // left out, and keys keep the order in which they first appeared.
  acc.add_iteration(loss_entries{{"lm loss", 2.0f}, {"zero loss", 0.0f}}, false);
  acc.add_iteration(loss_entries{{"lm loss", std::nanf("")}}, true);
  acc.add_iteration(loss_entries{{"lm loss", 3.0f}, {"mtp_1 loss", 0.75f}}, false);
  acc.add_iteration(loss_entries{{"lm loss", 1.0f}}, true);
  acc.add_iteration(loss_entries{{"lm loss", 4.0f}, {"mtp_1 loss", 0.75f}}, false);
  REQUIRE(acc.advanced_iterations() == 3);
  REQUIRE(acc.skipped_iterations() == 2);
  REQUIRE(acc.nan_iterations() == 1);
  training_log_inputs in;
  in.timestamp = "2026-12-02 19:00:00";
  in.iteration = 5;
  in.train_iters = 1000;
  in.consumed_train_samples = 160;
  in.skipped_train_samples = 64;
  in.interval_seconds = 2.0;  // 5 iterations: 400 ms each
  in.world_size = 4;
  in.flops_per_iteration = 8e12;  // 8e12 / (0.4 * 1e12 * 4) = 5.0
  in.energy_joules = 1000.0;      // 1000 / 5 / 4 = 50 J; 50 / 0.4 = 125 W
  in.learning_rate = 0.0;
  in.decoupled_learning_rate = 2.5e-5;
  in.global_batch_size = 32;
  in.loss_scale = 65536.0;
  in.grad_norm = std::nan("");
  in.num_zeros_in_grad = 123.0;
  in.params_norm = 1234.56789;
  CHECK(training_log_interval(in, acc) ==
        " [2026-12-02 19:00:00] iteration        5/    1000 | consumed samples:          160 | "
        "skipped samples:           64 | elapsed time per iteration (ms): 400.0 | throughput per "
        "GPU (TFLOP/s/GPU): 5.0 | energy per GPU (J/iter/GPU): 50.0 | power per GPU (W/GPU): "
        "125.0 | learning rate: 0.000000E+00 | decoupled learning rate: 2.500000E-05 | global "
        "batch size:    32 | lm loss: 3.000000E+00 | mtp_1 loss: 5.000000E-01 | loss scale: "
        "65536.0 | grad norm: nan | num zeros: 123.0 | params norm: 1234.568 | number of skipped "
        "iterations:   2 | number of nan iterations:   1 |");
  // After the reset the keys keep their order and sums restart from zero.
  acc.add_iteration(loss_entries{{"mtp_1 loss", 1.0f}, {"lm loss", 2.0f}}, false);
  const auto avgs = acc.loss_averages();
  REQUIRE(avgs.size() == 3);
  CHECK(avgs[0].first == "lm loss");
  CHECK(avgs[0].second == 2.0);
  CHECK(avgs[1].first == "zero loss");
  CHECK(avgs[2].second == 1.0);
}

TEST_CASE("loss sums are fp32 like Megatron's and the logged lr and grad norm pass through fp32") {
  training_log_accumulator acc;
  acc.add_iteration(loss_entries{{"lm loss", 16777216.0f}}, false);
  acc.add_iteration(loss_entries{{"lm loss", 1.0f}}, false);  // lost in an fp32 sum
  CHECK(acc.loss_averages()[0].second == 16777216.0 / 2);
  training_log_inputs in;
  in.interval_seconds = 1.0;
  in.learning_rate = 3.14159249999e-4;  // as a double 3.141592E-04, through fp32 3.141593E-04
  in.grad_norm = 1.2345;                 // as a double 1.234 (below the tie), fp32 1.235
  in.params_norm = 1.2345;               // Megatron does not round the params norm to fp32
  const training_log_line line = make_training_log_line(in, acc);
  CHECK(python_format_exp(line.learning_rate, 6) == "3.141593E-04");
  CHECK(python_format_exp(3.14159249999e-4, 6) == "3.141592E-04");
  CHECK(python_format_fixed(*line.grad_norm, 3) == "1.235");
  CHECK(python_format_fixed(*line.params_norm, 3) == "1.234");
}

TEST_CASE("the validation block is framed by dashes one longer than its text") {
  const loss_entries values{{"lm loss", 2.5f}};
  const std::string text =
      " validation loss at iteration 100 | lm loss value: 2.500000E+00 | lm loss PPL: "
      "1.218249E+01 | ";
  CHECK(format_validation_block("iteration 100", values) ==
        std::string(95, '-') + "\n" + text + "\n" + std::string(95, '-'));
  // A second validation set, and a loss above 20 whose perplexity is capped at exp(20).
  const loss_entries two{{"lm loss", 25.0f}, {"mtp_1 loss", 0.125f}};
  const std::string text2 =
      " validation-1 loss at iteration 200 on test set | lm loss value: 2.500000E+01 | lm loss "
      "PPL: 4.851652E+08 | mtp_1 loss value: 1.250000E-01 | mtp_1 loss PPL: 1.133148E+00 | ";
  CHECK(format_validation_block("iteration 200 on test set", two, 1) ==
        std::string(173, '-') + "\n" + text2 + "\n" + std::string(173, '-'));
  validation_loss_accumulator v;
  v.add("lm loss", 10.0f, 4.0f);
  v.add("lm loss", 5.0f, 2.0f);
  CHECK(v.values()[0].second == 2.5f);
}

TEST_CASE("the timers block equals megatron-core's Timers output for each option") {
  const std::vector<std::string> names = {"forward-backward", "forward-compute",
                                          "a-timer-name-that-is-longer-than-forty-eight-chars",
                                          "never-timed", "optimizer"};
  // seconds[rank][timer]; 0 where a rank did not time it.
  const std::vector<std::vector<double>> seconds = {{1.23456, 0.5, 0.001, 0.0, 0.25},
                                                    {1.3, 0.0, 0.002, 0.0, 0.26},
                                                    {1.1, 0.6, 0.0, 0.0, 0.27}};
  const double normalizer = 10.0;
  std::vector<timer_reading> readings;
  for (std::size_t t = 0; t < names.size(); ++t) {
    timer_reading r{names[t], {}};
    for (const auto& rank : seconds) r.seconds_by_rank.push_back(rank[t]);
    readings.push_back(r);
  }
  const std::vector<std::vector<double>> none = {{0.0, 0.0}, {0.0, 0.0}};
  json jobs = json::array();
  for (const char* option : {"minmax", "max", "all"})
    jobs.push_back({{"option", option}, {"names", names}, {"seconds", seconds},
                    {"normalizer", normalizer}});
  jobs.push_back({{"option", "minmax"}, {"names", {"a", "b"}}, {"seconds", none},
                  {"normalizer", 1.0}});
  const json ref = run_python_reference("training_log_reference.py", "timers", {{"jobs", jobs}}, "tests/training");
  const timing_log_option options[] = {timing_log_option::minmax, timing_log_option::max,
                                       timing_log_option::all};
  for (int i = 0; i < 3; ++i) {
    const auto got = format_timers_block(readings, options[i], normalizer);
    REQUIRE(got.has_value());
    CHECK(*got == ref["results"][i].get<std::string>());
  }
  CHECK(ref["results"][3].is_null());
  const std::vector<timer_reading> untimed = {{"a", {0.0, 0.0}}, {"b", {0.0, 0.0}}};
  CHECK_FALSE(format_timers_block(untimed, timing_log_option::minmax, 1.0).has_value());
  // The spec's shape, written out for one timer.
  const std::vector<timer_reading> one = {{"optimizer", {0.25, 0.5}}};
  CHECK(*format_timers_block(one, timing_log_option::minmax, 10.0) ==
        "(min, max) time across ranks (ms):\n    optimizer ......................................"
        ": (25.00, 50.00)");
}

TEST_CASE("a tracked value such as an MTP depth's loss is summed in a skipped iteration too") {
  // Megatron's track_mtp_metrics adds to total_loss_dict after the loss loop, whatever skipped_iter.
  training_log_accumulator acc;
  acc.add_iteration(loss_entries{{"lm loss", 2.0f}}, false);
  acc.add_tracked("mtp_1 loss", 1.0f);
  acc.add_iteration(loss_entries{{"lm loss", 5.0f}}, true);
  acc.add_tracked("mtp_1 loss", 3.0f);
  const auto averages = acc.loss_averages();
  REQUIRE(averages.size() == 2);
  CHECK(averages[0] == std::pair<std::string, double>{"lm loss", 2.0});
  CHECK(averages[1] == std::pair<std::string, double>{"mtp_1 loss", 4.0});  // (1 + 3) / 1 advanced
}
