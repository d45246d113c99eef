// The inspector's tokens per expert: the ranks' shares summed by router (pipeline stages hold
// different layers, the other ranks their own tokens of the same layers), and the text table.
#include <catch2/catch.hpp>

#include <regex>

#include "inspector/expert_load.hpp"
#include "inspector/text_view.hpp"

using namespace mactor::inspector;

TEST_CASE("the ranks' expert counts are summed by router, in name order") {
  // Two data-parallel ranks of stage 0 (layers 1 and 2) and one of stage 1 (layer 3), 3 experts.
  const std::vector<expert_load_share> shares = {
      {{"decoder.layers.1.mlp.router", "decoder.layers.2.mlp.router"}, {1, 2, 3, 10, 20, 30}},
      {{"decoder.layers.3.mlp.router"}, {7, 0, 0}},
      {{"decoder.layers.1.mlp.router", "decoder.layers.2.mlp.router"}, {4, 5, 6, 40, 50, 60}},
      {{}, {}},  // a rank of a dense stage
  };
  const auto rows = sum_expert_load(shares);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].router == "decoder.layers.1.mlp.router");
  CHECK(rows[0].tokens == std::vector<double>{5, 7, 9});
  CHECK(rows[1].tokens == std::vector<double>{50, 70, 90});
  CHECK(rows[2].router == "decoder.layers.3.mlp.router");
  CHECK(rows[2].tokens == std::vector<double>{7, 0, 0});
  CHECK(sum_expert_load({}).empty());
}

TEST_CASE("counts that do not split over the routers, or over other experts, are refused") {
  CHECK_THROWS_WITH(sum_expert_load({{{"a", "b"}, {1, 2, 3}}}), Catch::Contains("3 counts do not split over 2 routers"));
  CHECK_THROWS_WITH(sum_expert_load({{{"a"}, {1, 2}}, {{"a"}, {1, 2, 3}}}),
                    Catch::Contains("a is counted over 2 and 3 experts"));
}

TEST_CASE("the text view lists each MoE layer with its busiest expert's share of the mean") {
  job_snapshot s;
  s.expert_load_iteration = 42;
  s.expert_load = {{"decoder.layers.1.mlp.router", {10, 10, 10, 10}}, {"mtp.layers.0.mlp.router", {40, 0, 0, 0}}};
  const std::string text = render_text(s);
  INFO(text);
  CHECK(text.find("tokens per expert, iteration 42") != std::string::npos);
  CHECK(std::regex_search(text, std::regex(R"(\ndecoder\.layers\.1 +1\.00  10 10 10 10\n)")));
  CHECK(std::regex_search(text, std::regex(R"(\nmtp\.layers\.0 +4\.00  40 0 0 0\n)")));  // collapsed: every token to one expert
  // Without a MoE model, no table.
  CHECK(render_text(job_snapshot{}).find("tokens per expert") == std::string::npos);
  // Many experts: the counts are cut to the width.
  s.expert_load = {{"decoder.layers.1.mlp.router", std::vector<double>(128, 12345)}};
  const std::string wide = render_expert_load(1, s.expert_load, 100);
  CHECK(wide.find("...") != std::string::npos);
  for (std::size_t start = 0, end; (end = wide.find('\n', start)) != std::string::npos; start = end + 1)
    CHECK(end - start <= 100);
}
