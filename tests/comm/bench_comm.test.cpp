// bench_comm, the data-plane benchmark the README quotes, still runs and prints its table: one
// row per size and window with positive rates (the all-reduce's and all-to-all's too), the waiting policy and the lanes UCX chose; and
// it refuses bad flags with exit status 2. (Its rates are read by people, not asserted here.)
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

#include "tests/tools/run_command.hpp"

using mactor::test::bin_dir;
using mactor::test::run_shell;

TEST_CASE("bench_comm prints a row per size and window with positive rates and the lanes used") {
  const auto r = run_shell(bin_dir() + "/bench_comm --sizes 1,2 --repeats 1 --iters-scale 0.05 --untouched-send");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  // "    1 MiB   1    19.38   20.21    12.88 ... ok    96%  6.13  5.86 ..." : size, window, mactor
  // overall, ..., target, perftest's spread, all-reduce, all-to-all, CPU times.
  const std::regex row(R"(^\s*(\d+) MiB\s+(\d+)\s+([0-9.]+)\s+(\S+)\s+(\S+)\s+.*\s(ok|LOW|-)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+\S+\s+\S+$)");
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> seen;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    seen.push_back(m[1].str() + "/" + m[2].str());
    CHECK(std::stod(m[3].str()) > 0);  // mactor's stream rate
    CHECK(m[7].str() == "-");          // perftest's spread needs two rounds or more
    CHECK(std::stod(m[8].str()) > 0);  // the all-reduce's
    CHECK(std::stod(m[9].str()) > 0);  // the all-to-all's
    if (m[2].str() == "8") CHECK(m[4].str() == "-");  // no per-message median with a window
  }
  CHECK(seen == std::vector<std::string>{"1/1", "1/8", "2/1", "2/8"});
  CHECK(r.out.find("rank 0 waits by polling") != std::string::npos);
  CHECK(r.out.find("lane[") != std::string::npos);
}

TEST_CASE("bench_comm refuses a bad size or flag with exit status 2 and says what it takes") {
  auto r = run_shell(bin_dir() + "/bench_comm --sizes 0");
  CHECK(r.status == 2);
  CHECK(r.err.find("--sizes takes MiB values in (0, 1024]") != std::string::npos);
  r = run_shell(bin_dir() + "/bench_comm --frobnicate");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown argument --frobnicate") != std::string::npos);
}
