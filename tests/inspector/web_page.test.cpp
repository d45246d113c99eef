// The web page in headless Chromium (Debian's `chromium`) against a server with a fake 4-rank
// 1F1B job: the screenshot must show the timeline chart, checked by counting the chart's colours
// in the PNG (png_colours.py). The screenshots stay in BUILD/tests/inspector/.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fake_job.hpp"
#include "inspector/server.hpp"
#include "run_process.hpp"

using namespace mactor::inspector;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* const forward_colour = "#4c78a8";
const char* const backward_colour = "#f58518";
const char* const optimizer_colour = "#54a24b";
const char* const stall_border_colour = "#d62728";

fs::path out_dir() {
  fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests" / "inspector";
  fs::create_directories(dir);
  return dir;
}

// Loads url in headless Chromium for 3 s of virtual time (the page polls every 500 ms) and
// returns png_colours.py's analysis of the 1200x800 screenshot.
json screenshot_colours(const std::string& url, const std::string& name) {
  REQUIRE(testing::run_process("command -v chromium").status == 0);  // Debian `chromium`: scripts/setup.sh
  const fs::path png = out_dir() / (name + ".png");
  fs::remove(png);
  const auto shot = testing::run_process(
      "timeout 90 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
      "--user-data-dir='" + (out_dir() / ("chromium_profile_" + name)).string() + "' --screenshot='" + png.string() +
      "' --window-size=1200,800 --virtual-time-budget=3000 '" + url + "'");
  INFO("chromium said: " << shot.err);
  REQUIRE(shot.status == 0);
  REQUIRE(fs::exists(png));
  const auto analysis = testing::run_process(std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                                             "/tests/inspector/png_colours.py '" + png.string() + "' '" +
                                             forward_colour + "' '" + backward_colour + "' '" +
                                             optimizer_colour + "' '" + stall_border_colour + "'");
  INFO(analysis.err);
  REQUIRE(analysis.status == 0);
  return json::parse(analysis.out);
}

// The chart's rank rows: bands of a colour at least 15 pixels tall (the legend's swatch is 10).
std::vector<json> row_bands(const json& colours, const char* colour) {
  std::vector<json> rows;
  for (const auto& band : colours["colours"][colour]["bands"])
    if (band[1].get<int>() - band[0].get<int>() + 1 >= 15) rows.push_back(band);
  return rows;
}

}  // namespace

TEST_CASE("the web page draws the 4-rank 1F1B timeline in headless Chromium") {
  const job_snapshot job = testing::fake_job(4, 8);
  server s([&] { return job; }, nullptr);
  const json colours = screenshot_colours("http://" + s.address() + "/?token=" + s.token(), "inspector_page");
  CHECK(colours["width"] == 1200);
  CHECK(colours["height"] == 800);
  CHECK(colours["distinct"].get<int>() > 50);  // text, chart and table, not a blank page
  // The fake job's stalled stage is shown in the red-bordered stall box (2 px around ~1170x50).
  CHECK(colours["colours"][stall_border_colour]["pixels"].get<int>() > 2000);

  // One row per rank holding forward, backward and optimizer boxes, in the same 4 bands.
  const auto f = row_bands(colours, forward_colour), b = row_bands(colours, backward_colour),
             opt = row_bands(colours, optimizer_colour);
  REQUIRE(f.size() == 4);
  REQUIRE(b.size() == 4);
  REQUIRE(opt.size() == 4);
  CHECK(colours["colours"][forward_colour]["pixels"].get<int>() > 4000);
  CHECK(colours["colours"][backward_colour]["pixels"].get<int>() > 4000);
  for (int r = 0; r < 4; ++r) {
    CHECK(f[r][0] == b[r][0]);
    CHECK(f[r][0] == opt[r][0]);
  }

  // The boxes sit at their times: F0 on rank r starts r forward-times after rank 0's, as a
  // fraction of the iteration (rank 0's optimizer step ends it).
  double end = 0;
  for (const auto& e : job.last_iteration_timeline) end = std::max(end, e.end_s);
  const double x0 = f[0][2], width = opt[0][3].get<double>() + 1 - x0;
  for (int r = 1; r < 4; ++r) {
    const double fraction = (f[r][2].get<double>() - x0) / width;
    CHECK(fraction == Approx(r * testing::forward_s / end).margin(0.01));
  }
  // The last rank has no warmup: its first backward starts right after its first forward.
  CHECK((b[3][2].get<double>() - f[3][2].get<double>()) / width ==
        Approx(testing::forward_s / end).margin(0.01));
}

TEST_CASE("the web page draws no timeline when the token is refused") {
  const job_snapshot job = testing::fake_job(4, 8);
  server s([&] { return job; }, nullptr);
  std::string wrong = s.token();
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  // The page itself is refused, and so is every snapshot it would poll.
  const json colours = screenshot_colours("http://" + s.address() + "/?token=" + wrong, "inspector_page_refused");
  CHECK(colours["colours"][forward_colour]["pixels"] == 0);
  CHECK(colours["colours"][backward_colour]["pixels"] == 0);
}

TEST_CASE("the web page shows no timeline while the job cannot produce a snapshot") {
  server s([]() -> job_snapshot { throw std::runtime_error("coordinator is restarting"); }, nullptr);
  const json colours = screenshot_colours("http://" + s.address() + "/?token=" + s.token(), "inspector_page_error");
  CHECK(colours["colours"][forward_colour]["pixels"] == 0);
  CHECK(colours["colours"][backward_colour]["pixels"] == 0);
  CHECK(colours["colours"][stall_border_colour]["pixels"] == 0);
  CHECK(colours["distinct"].get<int>() > 2);  // the page itself (heading, error line) did render
}

TEST_CASE("the web page lists a MoE job's tokens per expert") {
  REQUIRE(testing::run_process("command -v chromium").status == 0);
  job_snapshot job = testing::fake_job(4, 8);
  job.expert_load_iteration = 17;
  job.expert_load = {{"decoder.layers.1.mlp.router", {30, 10, 20, 20}}, {"decoder.layers.2.mlp.router", {80, 0, 0, 0}}};
  server s([&] { return job; }, nullptr);
  const auto dom = testing::run_process(
      "timeout 90 chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir='" +
      (out_dir() / "chromium_profile_experts").string() + "' --virtual-time-budget=3000 --dump-dom 'http://" +
      s.address() + "/?token=" + s.token() + "'");
  INFO("chromium said: " << dom.err);
  REQUIRE(dom.status == 0);
  INFO(dom.out);
  CHECK(dom.out.find("tokens per expert, iteration 17") != std::string::npos);
  CHECK(dom.out.find("<td>decoder.layers.1</td><td class=\"num\">1.50</td><td>30 10 20 20</td>") != std::string::npos);
  CHECK(dom.out.find("<td>decoder.layers.2</td><td class=\"num\">4.00</td><td>80 0 0 0</td>") != std::string::npos);
}
