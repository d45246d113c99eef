// --log-straggler's report lines: Megatron-Core's StragglerDetector.report() format and rank
// attribution (megatron/core/utils.py), on known times.
#include <catch2/catch.hpp>

#include "training/straggler_report.hpp"

using mactor::training::straggler_sample;
using mactor::training::straggler_window;

TEST_CASE("straggler report: min and max per-rank times, batch times and throughput with their ranks") {
  straggler_window w;
  w.add({{0, 10.0, 1.0}, {1, 30.0, 2.0}}, 2e12);
  w.add({{0, 10.0, 3.0}, {1, 30.0, 0.5}}, 2e12);
  const auto lines = w.report(2, 2, 1, "[2026-12-04 20:00:00]");
  REQUIRE(lines.size() == 1);
  // Per iteration: rank 0 10 ms, rank 1 30 ms; 2e12 FLOPs / (t ms x 1e9 x 2 ranks) / 3 (amp).
  CHECK(lines[0] ==
        "[2026-12-04 20:00:00] | MnRtt/Rnk: 10.00ms/0 | MxRtt/Rnk: 30.00ms/1 | MnPwr/Rnk: 0.00W/0 | "
        "MxPwr/Rnk: 0.00W/0 | MnTmp/Rnk: 0.00C/0 | MxTmp/Rnk: 0.00C/0 | MnUtl/Rnk: 0.00%/0 | MxUtl/Rnk: 0.00%/0 | "
        "MnClk/Rnk: 0.00MHz/0 | MxClk/Rnk: 0.00MHz/0 | MnDRtt/Rnk: 2.00ms/1 | MxDRtt/Rnk: 3.00ms/0 | "
        "MnEtpt/Rnk: 11.11TF/1 | MxEtpt/Rnk: 33.33TF/0");
  CHECK(w.report(2, 2, 1, "[x]").empty());  // the window was cleared
}

TEST_CASE("straggler report: --straggler-minmax-count lists the bottom and top ranks by throughput") {
  straggler_window w;
  // 1.2e13 / (t x 4e9) / 3 = 1000 / t TF.
  w.add({{0, 10.0, 0}, {1, 40.0, 0}, {2, 20.0, 0}, {3, 25.0, 0}}, 1.2e13);
  const auto lines = w.report(1, 4, 2, "[t]");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].find("| MnRtt/Rnk: 10.00ms/0 | MxRtt/Rnk: 40.00ms/1 |") != std::string::npos);
  CHECK(lines[0].find("| MnDRtt/Rnk: 0.00ms/0 | MxDRtt/Rnk: 0.00ms/0 |") != std::string::npos);
  CHECK(lines[0].find("| MnEtpt/Rnk: 25.00TF/1 | MxEtpt/Rnk: 100.00TF/0") != std::string::npos);
  CHECK(lines[1] == "^^^^ Bottom 2 Ranks with lowest  Etpt(TF): 25.00/1, 40.00/3,");
  CHECK(lines[2] == "^^^^ Top    2 Ranks with highest Etpt(TF): 50.00/2, 100.00/0,");
  // A count of 1, or of the world, prints the first line only (Megatron: 1 < mmcnt < world).
  w.add({{0, 10.0, 0}, {1, 40.0, 0}, {2, 20.0, 0}, {3, 25.0, 0}}, 1.2e13);
  CHECK(w.report(1, 4, 4, "[t]").size() == 1);
}

TEST_CASE("straggler report: ties go to the first rank, as Python's min and max, and no FLOPs report nothing") {
  straggler_window w;
  w.add({{0, 5.0, 1.0}, {1, 5.0, 1.0}}, 1e9);
  const auto lines = w.report(1, 2, 1, "[t]");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("MnRtt/Rnk: 5.00ms/0 | MxRtt/Rnk: 5.00ms/0") != std::string::npos);
  w.add({{0, 5.0, 1.0}}, 0.0);
  CHECK(w.report(1, 2, 1, "[t]").empty());
}
