// The hybrid layer allocation against Megatron-Core's own allocate_layers (run from the installed
// megatron-core by hybrid_allocation_reference.py) over a grid of layer counts and ratios, ties
// of the rounding included, and override patterns that match, mismatch or are malformed.
#include "config/hybrid_layer_allocation.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace mactor;
namespace fs = std::filesystem;

namespace {

struct allocation_case {
  int layers;
  double attention, mlp;
  std::string pattern;  // empty: none
};

std::string ours(const allocation_case& c) {
  config::hybrid_allocation_settings s{c.layers, c.attention, c.mlp, std::nullopt};
  if (!c.pattern.empty()) s.pattern = c.pattern;
  try {
    return config::to_string(config::allocate_hybrid_layers(s));
  } catch (const std::invalid_argument&) {
    return "error";
  }
}

std::vector<allocation_case> cases() {
  std::vector<allocation_case> all;
  const double ratios[] = {0.0, 0.05, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.35, 0.5, 0.7, 1.0};
  for (int n = 1; n <= 52; ++n)
    for (double a : ratios)
      for (double m : ratios) all.push_back({n, a, m, ""});
  for (const char* p : {"M*-M*-M*-", "MMMMMMMMM", "M-M-M*-MM", "*********", "M*-M*-M*", "M*-M*-M*x"})
    for (double a : {0.0, 1.0 / 3, 0.2})
      for (double m : {0.0, 1.0 / 3}) all.push_back({9, a, m, p});
  return all;
}

std::vector<std::string> megatron(const std::vector<allocation_case>& all) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/config/hybrid_allocation";
  fs::create_directories(dir);
  std::ofstream in(dir / "cases.txt");
  in.precision(17);
  for (const auto& c : all) in << c.layers << " " << c.attention << " " << c.mlp << " " << c.pattern << "\n";
  in.close();
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  const std::string command = (fs::exists(venv) ? venv.string() : std::string("python3")) + " " +
                              MACTOR_SOURCE_DIR + "/tests/config/hybrid_allocation_reference.py " +
                              (dir / "cases.txt").string() + " " + (dir / "out.txt").string();
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream out(dir / "out.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  fs::remove_all(dir);
  return lines;
}

}  // namespace

TEST_CASE("hybrid layers are allocated as megatron-core allocates them") {
  const auto all = cases();
  const auto want = megatron(all);
  REQUIRE(want.size() == all.size());
  int errors = 0, patterns = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    INFO(all[i].layers << " layers, attention " << all[i].attention << ", mlp " << all[i].mlp
                       << ", pattern '" << all[i].pattern << "'");
    CHECK(ours(all[i]) == want[i]);
    errors += want[i] == "error", patterns += !all[i].pattern.empty() && want[i] != "error";
  }
  CHECK(errors > 0);    // the grid reaches Megatron's refusals
  CHECK(patterns > 0);  // and accepted override patterns
}

TEST_CASE("a bad hybrid override pattern is refused naming the flag and the fix") {
  auto message = [](config::hybrid_allocation_settings s) {
    try {
      config::allocate_hybrid_layers(s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(message({4, 0, 0, "M*-"}),
             Catch::Contains("--hybrid-override-pattern=M*- has 3 layers but --num-layers is 4"));
  CHECK_THAT(message({3, 0, 0, "M+-"}), Catch::Contains("use M (Mamba), * (attention) and - (MLP)"));
  CHECK_THAT(message({4, 0.5, 0, "MMM*"}), Catch::Contains("other layer counts than the ratios"));
  CHECK_THAT(message({4, 0.7, 0.5, std::nullopt}), Catch::Contains("at most all layers"));
}
