// JSON round trips and Megatron's arguments block.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <random>

#include "config/config_json.hpp"
#include "config/flag_table.hpp"
#include "config_test_support.hpp"

using namespace mactor::config;
using namespace mactor::config::testing;

namespace {

// Fills every field with a random value of its type, so round trips see more than defaults.
struct randomizer {
  std::mt19937_64& rng;
  template <class T>
  void fill(T& v) {
    if constexpr (std::is_same_v<T, bool>) v = rng() & 1;
    else if constexpr (std::is_same_v<T, std::int64_t>) v = static_cast<std::int64_t>(rng() % 100000) - 500;
    else if constexpr (std::is_same_v<T, double>) v = std::ldexp(static_cast<double>(rng() % 1000000), -static_cast<int>(rng() % 40));
    else if constexpr (std::is_same_v<T, std::string>) v = "s" + std::to_string(rng() % 1000) + (rng() & 1 ? " \"q\"" : "");
    else fill_compound(v);
  }
  template <class T>
  void fill_compound(std::optional<T>& v) {
    if (rng() % 3 == 0) { v.reset(); return; }
    T inner{};
    fill(inner);
    v = inner;
  }
  template <class T>
  void fill_compound(std::vector<T>& v) {
    v.resize(rng() % 4);
    for (auto& x : v) fill(x);
  }
  template <class A, class B>
  void fill_compound(std::variant<A, B>& v) {
    if (rng() & 1) { A a{}; fill(a); v = a; }
    else { B b{}; fill(b); v = b; }
  }
};

}  // namespace

TEST_CASE("randomized configs survive a JSON round trip unchanged") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; ++round) {
    megatron_args a;
    randomizer r{rng};
    for_each_flag_field([&](std::string_view, auto& field) { r.fill(field); }, static_cast<flag_args&>(a));
    a.derived.data_parallel_size = round + 1;
    a.derived.virtual_pipeline_model_parallel_size = round % 2 ? std::optional<std::int64_t>(round) : std::nullopt;
    const auto text = to_json(a);
    const auto back = from_json(text);
    CHECK(to_json(back) == text);
    bool all_equal = true;
    for_each_flag_field([&](std::string_view, const auto& x, const auto& y) { all_equal = all_equal && x == y; },
                        static_cast<const flag_args&>(a), static_cast<const flag_args&>(back));
    CHECK(all_equal);
  }
}

TEST_CASE("the JSON is keyed by Megatron's dests and carries the derived values") {
  auto v = with_base({}, 4);
  REQUIRE(v.report.ok());
  const auto j = nlohmann::json::parse(to_json(v.args));
  CHECK(j.size() == 564 + 12);  // 565 flags share 564 dests, plus the derived values
  CHECK(j["data_parallel_size"] == 4);
  CHECK(j["masked_softmax_fusion"] == true);
  CHECK(j["num_microbatches"] == 1);
  CHECK(j["encoder_num_layers"] == 4);
}

TEST_CASE("the arguments block is Megatron's: sorted, dotted to column 48, Python values") {
  auto v = with_base({"--data-cache-path", "/tmp/x"});
  const auto block = arguments_block(v.args);
  CHECK(block.rfind("------------------------ arguments ------------------------\n", 0) == 0);
  CHECK(block.find("  num_layers ...................................... 4\n") != std::string::npos);
  CHECK(block.find("  lr .............................................. 0.001\n") != std::string::npos);
  CHECK(block.find("  cp_comm_type .................................... ['p2p']\n") != std::string::npos);
  CHECK(block.find("  kv_channels ..................................... 16\n") != std::string::npos);
  CHECK(block.find("  decoder_num_layers .............................. None\n") != std::string::npos);
  CHECK(block.find("  norm_epsilon .................................... 1e-05\n") != std::string::npos);
  CHECK(block.find("batch_size ....") == block.find("global_batch_size ....") + 7);  // deleted by Megatron
  CHECK(block.find("accumulate_allreduce_grads_in_fp32") < block.find("adam_beta1"));
  const std::string last = "\n-------------------- end of arguments ---------------------\n";
  CHECK(block.compare(block.size() - last.size(), last.size(), last) == 0);
}
