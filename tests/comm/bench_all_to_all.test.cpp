// bench_all_to_all, the expert-parallel all-to-all benchmark the README quotes, still runs and
// prints its tables: a row per message size with positive all-to-all rates for 2 and 4 ranks
// next to ucx_perftest's, and a MoE dispatch row per expert-parallel size; and it refuses bad
// flags with exit status 2. (Its rates are read by people, not asserted here.)
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

#include "tests/tools/run_command.hpp"

using mactor::test::bin_dir;
using mactor::test::run_shell;

TEST_CASE("bench_all_to_all prints a row per size for 2 and 4 ranks and a MoE dispatch row per EP size") {
  const auto r = run_shell(bin_dir() + "/bench_all_to_all --sizes 4,64 --repeats 1 --tokens 256 --hidden 64");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  // "|         4 KiB |          0.30 |  105% |          0.13 |   44% |          0.03 |           0.29 |"
  // ("-" in the perftest columns where ucx_perftest, Debian's ucx-utils, is not installed.)
  const std::regex size_row(R"(^\|\s+(\d+) KiB \|\s+([0-9.]+) \|\s+(\d+%|-) \|\s+([0-9.]+) \|\s+(\d+%|-) \|\s+([0-9.]+|-) \|\s+([0-9.]+|-) \|$)");
  const bool have_perftest = run_shell("command -v ucx_perftest").status == 0;
  // "|  2 |     7.95 |    2.53 |    13.60 |    13.64 |     53.67 |  83.4 |     0.57 |     2.11 |": EP, MiB
  // sent, permute, the two exchanges, unpermute, total, the exchange's rate and the bare a2a's.
  const std::regex moe_row(
      R"(^\|\s+(\d) \|\s+([0-9.]+) \|\s+([0-9.]+) \|\s+([0-9.]+) \|\s+([0-9.]+) \|\s+([0-9.]+) \|\s+([0-9.]+) \|\s+([0-9.]+) \|\s+([0-9.]+) \|$)");
  std::istringstream lines(r.out);
  std::vector<std::string> sizes, moe_sizes;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, size_row)) {
      sizes.push_back(m[1].str());
      CHECK(std::stod(m[2].str()) > 0);  // 2 ranks
      CHECK(std::stod(m[4].str()) > 0);  // 4 ranks
      if (have_perftest) {
        CHECK(std::stod(m[6].str()) + std::stod(m[7].str()) > 0);  // perftest ran
        CHECK(m[3].str() != "-");
      } else {
        CHECK(m[6].str() == "-");
      }
    } else if (std::regex_match(line, m, moe_row)) {
      moe_sizes.push_back(m[1].str());
      CHECK(std::stod(m[2].str()) > 0);  // rows went to the other ranks
      CHECK(std::stod(m[4].str()) > 0);  // the dispatch exchange took time
      CHECK(std::stod(m[5].str()) > 0);  // and the combine's
      CHECK(std::stod(m[9].str()) > 0);  // the bare all-to-all's rate
    }
  }
  CHECK(sizes == std::vector<std::string>{"4", "64"});
  CHECK(moe_sizes == std::vector<std::string>{"2", "4"});
}

TEST_CASE("bench_all_to_all refuses a bad size, rank count or flag with exit status 2 and says what it takes") {
  auto r = run_shell(bin_dir() + "/bench_all_to_all --sizes 0");
  CHECK(r.status == 2);
  CHECK(r.err.find("--sizes takes whole numbers in [1, 262144]") != std::string::npos);
  r = run_shell(bin_dir() + "/bench_all_to_all --ranks 3");
  CHECK(r.status == 2);
  CHECK(r.err.find("--ranks 3 does not divide the MoE rows' 8 experts") != std::string::npos);
  r = run_shell(bin_dir() + "/bench_all_to_all --tokens");
  CHECK(r.status == 2);
  CHECK(r.err.find("--tokens needs a value") != std::string::npos);
  r = run_shell(bin_dir() + "/bench_all_to_all --frobnicate");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown argument --frobnicate") != std::string::npos);
}
