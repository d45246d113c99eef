// Random command lines never crash the front end: they parse, or fail with a usage error (exit 2).
#include <catch2/catch.hpp>

#include <random>

#include "config/flag_table.hpp"
#include "config/resolve.hpp"

using namespace mactor::config;

TEST_CASE("random flag strings parse or give exit status 2, never a crash") {
  std::mt19937 rng(7);
  const auto& specs = flag_specs();
  const std::vector<std::string> values{"1", "-1", "0", "x", "", "1e309", "([1]*3+[0])*2", "(1,2)", "--", "-", "nan",
                                        "99999999999999999999", "rope", "=", "[", "1,", "0.5", "-.5", "--no-", "True"};
  int accepted = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::string> words;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const auto& s = specs[rng() % specs.size()];
      switch (rng() % 4) {
        case 0: words.push_back(s.options[rng() % s.options.size()]); break;
        case 1: words.push_back(s.options.front() + "=" + values[rng() % values.size()]); break;
        case 2: words.push_back(values[rng() % values.size()]); break;
        default: words.push_back(s.options.front().substr(0, 2 + rng() % s.options.front().size())); break;
      }
    }
    for (int world : {1, 3}) {
      resolution r;
      REQUIRE_NOTHROW(r = resolve(words, "pretrain_gpt", {0, world}));
      if (r.exit_status.value_or(0) == 0) {
        ++accepted;
      } else {
        CHECK(*r.exit_status == 2);
        CHECK(r.err.find("pretrain_gpt: error: ") != std::string::npos);
        ++refused;
      }
    }
  }
  CHECK(refused > 0);
}
