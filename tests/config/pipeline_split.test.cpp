// The pipeline layer split against Megatron-Core's own get_num_layers_to_build,
// get_transformer_layer_offset and PipelineParallelLayerLayout (tests/config/pipeline_split_reference.py).
#include "config/pipeline_split.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "config/resolve.hpp"

using namespace mactor;

namespace {

struct split_case {
  int layers, pp, vp;
  std::optional<int> first, last;
  bool embedding = false, loss = false;
  std::optional<std::string> layout = std::nullopt;
};

std::string line_of(const split_case& c) {
  auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string("-"); };
  return std::to_string(c.layers) + " " + std::to_string(c.pp) + " " + std::to_string(c.vp) + " " + opt(c.first) + " " +
         opt(c.last) + " " + (c.embedding ? "1" : "0") + " " + (c.loss ? "1" : "0") + " " + c.layout.value_or("-");
}

// Megatron's answer for every case: its lines ("R V OFFSET COUNT", "repr ...", "error ...").
std::vector<std::vector<std::string>> megatron_answers(const std::vector<split_case>& cases) {
  const std::string input = "/tmp/mactor_pipeline_split_cases_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream f(input);
    for (const auto& c : cases) f << line_of(c) << "\n";
  }
  const std::string command = std::string(MACTOR_PYTHON) + " " + MACTOR_SOURCE_DIR +
                              "/tests/config/pipeline_split_reference.py < " + input;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::vector<std::vector<std::string>> out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();  // Megatron pads columns
    if (line.rfind("case ", 0) == 0) out.emplace_back();
    else if (!out.empty()) out.back().push_back(line);
  }
  REQUIRE(::pclose(pipe) == 0);
  std::remove(input.c_str());
  REQUIRE(out.size() == cases.size());
  return out;
}

config::pipeline_split_settings settings_of(const split_case& c) {
  config::pipeline_split_settings s;
  s.num_layers = c.layers, s.pipeline_size = c.pp, s.virtual_size = c.vp;
  s.first_stage_layers = c.first, s.last_stage_layers = c.last;
  s.account_for_embedding = c.embedding, s.account_for_loss = c.loss;
  s.layout = c.layout;
  if (c.layout) s.virtual_size = int(config::parse_pipeline_layout(*c.layout).size()) / c.pp;
  return s;
}

}  // namespace

TEST_CASE("every layer split equals Megatron-Core's get_num_layers_to_build and get_transformer_layer_offset") {
  const std::vector<split_case> cases = {
      {8, 2, 1, {}, {}},           {8, 2, 2, {}, {}},          {12, 4, 3, {}, {}},
      {8, 4, 1, 1, 3},             {9, 3, 1, 1, {}},           {10, 3, 1, {}, 2},
      {12, 4, 2, 2, 4},            {16, 4, 2, 4, {}},          {6, 2, 1, 1, 5},
      {10, 2, 1, {}, {}, true, true}, {7, 2, 1, {}, {}, true},  {7, 4, 1, {}, {}, false, true},
      {14, 2, 2, {}, {}, true, true}, {6, 4, 2, {}, {}, true, true},
      {12, 4, 1, {}, {}, true, true},  // 14 layers do not divide over 4 ranks: both refuse
      {8, 4, 1, 3, 3},                 // 2 layers for 2 middle stages
      {9, 4, 1, 3, 3},                 // 3 layers do not divide over 2 middle stages: both refuse
      {12, 4, 2, 3, {}},               // 3 first-stage layers over 2 virtual stages: both refuse
      {4, 3, 1, {}, {}, false, false, "Et*2|tt|L"},
      {6, 2, 2, {}, {}, false, false, "Et|t|tt|ttL"},
      {3, 2, 2, {}, {}, false, false, "Et|t||tL"},
      {10, 3, 1, {}, {}, false, false, "E|(ttttt|)*2L"},
      {8, 2, 2, {}, {}, false, false, "Et,(tt|)*3t,L"},
      {16, 4, 2, {}, {}, false, false, "Et*2|(tt|)*5t|tL"},
      {5, 2, 1, {}, {}, false, false, "Et*2|ttL"},  // 4 layers placed, 5 asked: both refuse
  };
  const auto answers = megatron_answers(cases);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    const auto& megatron = answers[k];
    INFO("case " << line_of(c) << "\nMegatron: " << (megatron.empty() ? "" : megatron.front()));
    const bool refused = !megatron.empty() && megatron.front().rfind("error", 0) == 0;
    if (refused) {
      CHECK_THROWS_AS(config::split_pipeline_layers(settings_of(c)), std::invalid_argument);
      continue;
    }
    const auto split = config::split_pipeline_layers(settings_of(c));
    std::vector<std::string> ours, repr;
    for (int r = 0; r < c.pp; ++r)
      for (std::size_t v = 0; v < split.stages[std::size_t(r)].size(); ++v) {
        const auto& span = split.stages[std::size_t(r)][v];
        ours.push_back(std::to_string(r) + " " + std::to_string(v) + " " + std::to_string(span.layer_begin) + " " +
                       std::to_string(span.layers()));
      }
    std::istringstream described(config::describe_pipeline_split(split));
    for (std::string line; std::getline(described, line);) repr.push_back("repr " + line);
    std::vector<std::string> expected_spans, expected_repr;
    for (const auto& line : megatron) (line.rfind("repr ", 0) == 0 ? expected_repr : expected_spans).push_back(line);
    CHECK(ours == expected_spans);
    // Megatron prints a layout's stages; ours (for every split) must read the same for layouts.
    if (c.layout) CHECK(repr == expected_repr);
    CHECK(split.stages.front().front().embedding);
    CHECK(split.stages.back().back().loss);
  }
}

TEST_CASE("the V placement of --pipeline-schedule zbv folds the stages back: rank 0 holds the embedding and the loss") {
  config::pipeline_split_settings s;
  s.num_layers = 8, s.pipeline_size = 2, s.virtual_size = 2;
  s.placement = config::stage_placement::v_shape;
  const auto split = config::split_pipeline_layers(s);
  // Stages 0..3 hold layers [0,2) [2,4) [4,6) [6,8); stage 0 on rank 0, 1 and 2 on rank 1, 3 on rank 0.
  CHECK(split.at(0, 0).layer_begin == 0);
  CHECK(split.at(1, 0).layer_begin == 2);
  CHECK(split.at(1, 1).layer_begin == 4);
  CHECK(split.at(0, 1).layer_begin == 6);
  CHECK(split.at(0, 0).embedding);
  CHECK(split.at(0, 1).loss);
  CHECK_FALSE(split.at(1, 1).loss);
  for (int pp : {2, 3, 4})
    for (int v = 0; v < 2 * pp; ++v) {
      const auto at = config::position_of_stage(config::stage_placement::v_shape, pp, v);
      CHECK(config::virtual_stage_of(config::stage_placement::v_shape, pp, at.rank, at.chunk) == v);
      CHECK(at.rank == (v < pp ? v : 2 * pp - 1 - v));
    }
}

TEST_CASE("a bad layout names the flag and what is wrong") {
  using config::parse_pipeline_layout;
  CHECK(parse_pipeline_layout("Et*2|(tt|)*2L") == std::vector<std::string>{"Ett", "tt", "tt", "L"});
  CHECK(parse_pipeline_layout("E|t,t|L") == std::vector<std::string>{"E", "tt", "L"});
  CHECK_THROWS_WITH(parse_pipeline_layout("Ext|L"), Catch::Contains("--pipeline-model-parallel-layout") &&
                                                       Catch::Contains("invalid layer character 'x'"));
  config::pipeline_split_settings s;
  s.num_layers = 2, s.pipeline_size = 2;
  s.layout = "tE|tL";
  CHECK_THROWS_WITH(config::split_pipeline_layers(s), Catch::Contains("the first layer must be the embedding 'E'"));
  s.layout = "Et|t";
  CHECK_THROWS_WITH(config::split_pipeline_layers(s), Catch::Contains("the last layer must be the loss 'L'"));
  s.layout = "Et|tm|L", s.virtual_size = 1, s.pipeline_size = 3, s.mtp_num_layers = 1;
  CHECK_THROWS_WITH(config::split_pipeline_layers(s), Catch::Contains("must all be in the last stage, together with the loss"));
  s.layout = "Et|mt|L";
  CHECK_THROWS_WITH(config::split_pipeline_layers(s), Catch::Contains("decoder layers 't' must be placed before the MTP layers"));
  s.layout = "Et|tmL", s.pipeline_size = 2, s.mtp_num_layers = 2;
  CHECK_THROWS_WITH(config::split_pipeline_layers(s), Catch::Contains("places 1 MTP layers 'm' but --mtp-num-layers is 2"));
  s.mtp_num_layers = 1;  // Megatron's placement: after the decoder, in the last stage with the loss
  const auto split = config::split_pipeline_layers(s);
  CHECK(split.at(0, 0).layers() == 1);
  CHECK(split.at(1, 0).layers() == 1);
  CHECK(split.at(1, 0).loss);
}

TEST_CASE("uneven pipeline and layout flags are validated on the command line with exit status 2") {
  const std::vector<std::string> base = {"--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
                                         "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "1",
                                         "--train-iters", "1", "--lr", "1e-3", "--mock-data", "--tokenizer-type",
                                         "NullTokenizer", "--vocab-size", "128", "--pipeline-model-parallel-size", "2"};
  auto resolve = [&](std::vector<std::string> extra) {
    auto flags = base;
    flags.insert(flags.end(), extra.begin(), extra.end());
    return config::resolve(flags, "pretrain_gpt", {0, 2});
  };
  CHECK_FALSE(resolve({"--decoder-first-pipeline-num-layers", "3"}).exit_status.has_value());
  CHECK_FALSE(resolve({"--pipeline-model-parallel-layout", "Et*3|t*5L"}).exit_status.has_value());
  const auto wrong_count = resolve({"--pipeline-model-parallel-layout", "Et*3|t*4L"});
  REQUIRE(wrong_count.exit_status == 2);
  CHECK_THAT(wrong_count.err, Catch::Contains("places 7 transformer layers 't' but --num-layers is 8"));
  const auto both = resolve({"--pipeline-model-parallel-layout", "Et*4|t*4L", "--decoder-last-pipeline-num-layers", "4"});
  REQUIRE(both.exit_status == 2);
  CHECK_THAT(both.err, Catch::Contains("cannot be combined"));
  const auto stages = resolve({"--pipeline-model-parallel-layout", "Et*4|t*2|t*2L"});
  REQUIRE(stages.exit_status == 2);
  CHECK_THAT(stages.err, Catch::Contains("3 stages, which is not divisible by --pipeline-model-parallel-size=2"));
}
