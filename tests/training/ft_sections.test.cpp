// The fault-tolerance section clock against known answers worked out by hand from NVIDIA
// Resiliency Extension's rules (TimeoutsCalc: a timeout is the longest time seen x 5, averaged
// with the timeout in force where that was calculated too; out of section is the time with no
// section open), the state file's format (RankMonitorClient.state_dict as Megatron writes it),
// and Megatron's rules for which timeouts a run may recalculate.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "training/ft_integration.hpp"
#include "training/ft_sections.hpp"

namespace tr = mactor::training;
using clock_type = tr::ft_section_clock::clock;
using namespace std::chrono_literals;

namespace {

tr::ft_section_timeouts three_sections(std::optional<double> setup, std::optional<double> step,
                                       std::optional<double> checkpointing, std::optional<double> oos) {
  tr::ft_section_timeouts t;
  t.section = {{"setup", setup}, {"step", step}, {"checkpointing", checkpointing}};
  t.out_of_section = oos;
  return t;
}

std::optional<tr::ft_section_timeouts> saved_state(const std::filesystem::path& dir) {
  std::ifstream in(dir / "ft_state.json");
  std::ostringstream text;
  text << in.rdbuf();
  return tr::parse_ft_state(text.str(), (dir / "ft_state.json").string());
}

// `steps` training steps of 100 ms, 10 ms apart, from `at`, then a save of 1 s; returns the time after it.
clock_type::time_point steps_then_save(tr::ft_integration& ft, clock_type::time_point at, int steps,
                                      std::vector<std::string>& log) {
  for (int i = 0; i < steps; ++i) {
    ft.training_step_start(at);
    at += 100ms;
    ft.training_step_end(at);
    at += 10ms;
  }
  ft.checkpointing_start(at);
  at += 1s;
  ft.checkpointing_end(at, log);
  return at;
}

}  // namespace

TEST_CASE("ft: a section open past its configured timeout, or no section past the out-of-section one, is expired") {
  const auto t0 = clock_type::now();
  tr::ft_section_clock c(three_sections(600, 2, std::nullopt, 5), t0);
  CHECK_FALSE(c.expired(t0 + 4s));
  const auto quiet = c.expired(t0 + 6s);  // nothing opened yet: out of section since the start
  REQUIRE(quiet);
  CHECK(quiet->section == "out-of-section");
  CHECK(quiet->open_s == Approx(6));
  CHECK(quiet->timeout_s == 5);

  c.open("step", t0 + 1s);
  CHECK_FALSE(c.expired(t0 + 2500ms));
  const auto step = c.expired(t0 + 3500ms);
  REQUIRE(step);
  CHECK(step->section == "step");
  CHECK(step->open_s == Approx(2.5));
  c.close("step", t0 + 3500ms);
  CHECK_FALSE(c.expired(t0 + 8s));  // out of section again, 4.5 s of the 5
  c.open("checkpointing", t0 + 8s);
  CHECK_FALSE(c.expired(t0 + 1000s));  // checkpointing has no timeout

  CHECK_THROWS_AS(c.open("checkpointing", t0 + 1001s), std::logic_error);
  CHECK_THROWS_AS(c.close("step", t0 + 1001s), std::logic_error);
  CHECK_THROWS_AS(c.open("evaluation", t0 + 1001s), std::logic_error);
}

TEST_CASE("ft: calculated timeouts are 5 x the longest time seen, averaged with an earlier calculation") {
  const auto t0 = clock_type::now();
  tr::ft_section_clock c(three_sections(std::nullopt, 100, std::nullopt, std::nullopt), t0);
  c.open("setup", t0);
  c.close("setup", t0 + 10s);          // setup 10 s
  c.open("step", t0 + 11s);            // 1 s out of section
  c.close("step", t0 + 13s);           // step 2 s
  c.open("step", t0 + 13500ms);        // 0.5 s out of section
  c.close("step", t0 + 16500ms);       // step 3 s: the longest
  CHECK_FALSE(c.can_calculate({"checkpointing"}, false));
  REQUIRE(c.can_calculate({"setup", "step"}, true));
  c.calculate({"step"}, false, t0 + 17s);
  CHECK(*c.timeouts().section.at("step") == Approx(15));  // configured 100 was not calculated: replaced
  CHECK_FALSE(c.timeouts().section.at("setup"));          // not selected: unchanged
  CHECK(c.timeouts().calculated_sections == std::set<std::string>{"step"});

  // At the end the stretch since the last close counts out of section (2.5 s, the longest).
  c.calculate({"setup", "step"}, true, t0 + 19s);
  CHECK(*c.timeouts().section.at("setup") == Approx(50));
  CHECK(*c.timeouts().section.at("step") == Approx(15));  // averaged with itself
  CHECK(*c.timeouts().out_of_section == Approx(12.5));
  CHECK(c.timeouts().out_of_section_calculated);

  // A later run: the loaded step timeout (15) averaged with this run's 5 x 1 s.
  tr::ft_section_clock next(three_sections(std::nullopt, std::nullopt, std::nullopt, std::nullopt), t0);
  next.load(c.timeouts());
  next.open("step", t0 + 1s);
  next.close("step", t0 + 2s);
  next.calculate({"step"}, false, t0 + 2s);
  CHECK(*next.timeouts().section.at("step") == Approx((15 + 5) / 2.0));
  CHECK(*next.timeouts().section.at("setup") == Approx(50));  // kept from the file
}

TEST_CASE("ft: the state file is the rank monitor client's state and reads back") {
  auto t = three_sections(50, 15, std::nullopt, 12.5);
  t.calculated_sections = {"step", "setup"};
  t.out_of_section_calculated = true;
  const auto j = nlohmann::json::parse(tr::ft_state_json(t));
  const auto& s = j.at("current_timeouts").at("section");
  CHECK(s.at("section").at("setup") == 50.0);
  CHECK(s.at("section").at("checkpointing").is_null());
  CHECK(s.at("out_of_section") == 12.5);
  CHECK(s.at("calculated_sections") == nlohmann::json::array({"setup", "step"}));  // sorted, as NVRx writes them
  CHECK(s.at("is_out_of_section_calculated") == true);
  const auto back = tr::parse_ft_state(tr::ft_state_json(t), "f");
  REQUIRE(back);
  CHECK(back->section == t.section);
  CHECK(back->calculated_sections == t.calculated_sections);
  CHECK(*back->out_of_section == 12.5);

  // Nothing calculated: no "section" entry, as NVRx's state_dict.
  CHECK(tr::ft_state_json(three_sections(1, 2, 3, 4)) == R"({"current_timeouts":{}})");
  CHECK_FALSE(tr::parse_ft_state(R"({"current_timeouts":{}})", "f"));
  CHECK_THROWS_WITH(tr::parse_ft_state("{", "/x/ft_state.json"), Catch::Contains("/x/ft_state.json") && Catch::Contains("delete it"));
  CHECK_THROWS_WITH(tr::parse_ft_state(R"({"a":1})", "f"), Catch::Contains("current_timeouts"));
}

TEST_CASE("ft: ft_launcher's section timeout spec") {
  const auto t = tr::parse_section_timeouts("setup:600,step:180.5,checkpointing:none");
  CHECK(*t.at("setup") == 600);
  CHECK(*t.at("step") == 180.5);
  CHECK_FALSE(t.at("checkpointing"));
  CHECK(tr::parse_section_timeouts("step:null").at("step") == std::nullopt);
  CHECK_THROWS_WITH(tr::parse_section_timeouts("setup=600"), Catch::Contains("NAME:SECONDS"));
  CHECK_THROWS_WITH(tr::parse_section_timeouts("step:fast"), Catch::Contains("step") && Catch::Contains("fast"));
  CHECK_THROWS_WITH(tr::parse_section_timeouts("step:-1"), Catch::Contains("above 0"));
  CHECK_THROWS(tr::parse_section_timeouts("step:1,"));
}

TEST_CASE("ft: Megatron's rules decide which timeouts a run recalculates") {
  const auto dir = std::filesystem::temp_directory_path() / ("mactor_ft_rules_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const auto t0 = clock_type::now();
  tr::ft_settings settings;
  settings.save_dir = dir.string();
  settings.calc_timeouts = true;
  settings.configured = three_sections(std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  std::vector<std::string> log;
  tr::ft_integration ft(settings, t0, log);
  auto at = steps_then_save(ft, t0 + 2s, 16, log);  // the first step is a warm-up, out of section
  // No persistent checkpoint was loaded (setup not updated) and only 15 steps were in a section
  // but 16 seen: step and checkpointing.
  auto saved = saved_state(dir);
  REQUIRE(saved);
  CHECK(saved->calculated_sections == std::set<std::string>{"checkpointing", "step"});
  CHECK(*saved->section.at("step") == Approx(0.5));
  CHECK(*saved->section.at("checkpointing") == Approx(5));
  CHECK_FALSE(saved->out_of_section_calculated);
  ft.shutdown(at + 1s, log);  // setup still unknown: no out-of-section either
  CHECK(std::find(log.begin(), log.end(), "FT: the out-of-section timeout won't be updated until all FT sections were seen") != log.end());

  // The next run loads a persistent checkpoint: setup too, and out of section at the end.
  std::vector<std::string> log2;
  tr::ft_integration again(settings, t0, log2);
  CHECK(log2.at(1).rfind("FT: loaded timeouts from " + (dir / "ft_state.json").string(), 0) == 0);
  again.checkpoint_loaded(false);
  at = steps_then_save(again, t0 + 4s, 17, log2);  // setup 4 s
  again.shutdown(at + 2s, log2);  // 2 s with no section open: the longest
  saved = saved_state(dir);
  REQUIRE(saved);
  CHECK(saved->calculated_sections == std::set<std::string>{"checkpointing", "setup", "step"});
  CHECK(*saved->section.at("setup") == Approx(20));
  CHECK(*saved->section.at("checkpointing") == Approx(5));  // 5 averaged with 5
  CHECK(saved->out_of_section_calculated);
  CHECK(*saved->out_of_section == Approx(10));
  std::filesystem::remove_all(dir);
}
