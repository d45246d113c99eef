// render_text: the actor lines and an ASCII timeline whose boxes sit where the events happened.
#include <catch2/catch.hpp>
#include <sstream>

#include "fake_job.hpp"
#include "inspector/text_view.hpp"

using namespace mactor::inspector;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string timeline_row(const std::string& text, int rank) {
  std::string prefix = "rank " + std::to_string(rank);
  for (const auto& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0 && line.find('|') != std::string::npos) return line;
  return "";
}

}  // namespace

TEST_CASE("the text view has a line per actor with its numbers") {
  const job_snapshot job = testing::fake_job();
  const std::string text = render_text(job, 100);
  CHECK(text.find("iteration 12 / 100") != std::string::npos);
  for (const auto& a : job.actors) {
    bool found = false;
    for (const auto& line : lines_of(text))
      found |= line.rfind(a.kind, 0) == 0 && line.find(a.activity) != std::string::npos &&
               line.find(" " + std::to_string(a.rank) + " ") != std::string::npos;
    CHECK(found);
  }
  // stage/1: 12.4 s waiting, mailbox 1, 1501 msgs/s, 3 GiB sent, 2 MiB received
  CHECK(text.find("awaiting recv_backward mb 7 chunk 0 from rank 2") != std::string::npos);
  CHECK(text.find("    12.4        1   1501.0    3.0 GiB    2.0 MiB") != std::string::npos);
  CHECK(text.find("STALLED:\n  rank 1 stage waits 12.4 s") != std::string::npos);
}

TEST_CASE("each timeline box starts at its event's start time") {
  // 4 ranks, 8 microbatches: F0 reaches rank r at r ms; the iteration ends with the optimizer.
  const job_snapshot job = testing::fake_job(4, 8);
  double end = 0;
  for (const auto& e : job.last_iteration_timeline) end = std::max(end, e.end_s);
  const int width = 111, columns = width - 11;
  const std::string text = render_text(job, width);
  for (int r = 0; r < 4; ++r) {
    const std::string row = timeline_row(text, r);
    REQUIRE(row.size() == static_cast<std::size_t>(width));
    const std::size_t cells = row.find('|') + 1;
    // forward of mb 0 on rank r starts after r forwards of 1 ms each
    const int expected = static_cast<int>(std::lround(r * testing::forward_s / end * columns));
    const int got = static_cast<int>(row.find("F0")) - static_cast<int>(cells);
    CHECK(std::abs(got - expected) <= 1);  // rounding of a float sum vs of a product
    // every microbatch appears once forward and once backward on every rank
    for (int mb = 0; mb < 8; ++mb) {
      CHECK(row.find("F" + std::to_string(mb)) != std::string::npos);
      CHECK(row.find("B" + std::to_string(mb)) != std::string::npos);
    }
  }
  // 1F1B: the last rank runs B0 right after F0 (no warmup); rank 0 runs F1, F2, F3 first.
  const std::string last = timeline_row(text, 3), first = timeline_row(text, 0);
  CHECK(last.find("B0") < last.find("F1"));
  CHECK(first.find("F3") < first.find("B0"));
  CHECK(text.find("ms, one column = ") != std::string::npos);
}

TEST_CASE("chunks are shown when the schedule is interleaved") {
  job_snapshot job;
  job.last_iteration_timeline = {{0, "F", 3, 1, 0.0, 0.5}, {0, "B", 3, 0, 0.5, 1.0}};
  const std::string row = timeline_row(render_text(job, 61), 0);
  CHECK(row.find("F3.1") != std::string::npos);
  CHECK(row.find("B3.0") != std::string::npos);
}

TEST_CASE("byte counts are printed in binary units") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(3LL << 30) == "3.0 GiB");
}
