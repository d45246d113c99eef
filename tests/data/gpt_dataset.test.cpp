// Tests for data/gpt_dataset, split, numpy_random, blended_dataset: hand-computed cases and
// Megatron-Core's own GPTDataset/BlendedDataset (through tests/data/megatron_reference.py).
#include "data/gpt_dataset.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "data/blended_dataset.hpp"
#include "data/md5.hpp"
#include "data/numpy_random.hpp"
#include "data/py_json.hpp"
#include "data/split.hpp"
#include "data_test_util.hpp"

using namespace mactor::data;
namespace t = mactor::data::test;
namespace fs = std::filesystem;

TEST_CASE("split strings parse into Megatron's bookends") {
  auto m = convert_split_vector_to_split_matrix(parse_and_normalize_split("949,50,1"));
  CHECK(m[0]->first == 0.0);
  CHECK(m[0]->second == 0.949);
  CHECK(m[1]->second == Approx(0.999));
  CHECK(m[2]->second == Approx(1.0));
  CHECK(split_range(m, 0, 1000) == std::make_pair<std::int64_t, std::int64_t>(0, 949));
  CHECK(split_range(m, 1, 1000) == std::make_pair<std::int64_t, std::int64_t>(949, 999));
  CHECK(split_range(m, 2, 1000) == std::make_pair<std::int64_t, std::int64_t>(999, 1000));
  auto m2 = convert_split_vector_to_split_matrix(parse_and_normalize_split("99 1"));
  CHECK_FALSE(m2[2].has_value());
  CHECK(m2[1]->second == 1.0);
  auto m3 = convert_split_vector_to_split_matrix(parse_and_normalize_split("99990,8,2"));
  CHECK(split_range(m3, 1, 1000) == std::make_pair<std::int64_t, std::int64_t>(1000, 1000));
  // round half to even: 0.5 * 5 = 2.5 -> 2
  auto m4 = convert_split_vector_to_split_matrix(parse_and_normalize_split("1,1"));
  CHECK(split_range(m4, 0, 5)->second == 2);
  CHECK_THROWS_WITH(parse_and_normalize_split("1.2.3"), Catch::Contains("--split"));
  CHECK_THROWS_AS(parse_and_normalize_split("0,0,0"), data_error);
  CHECK_THROWS_AS(parse_and_normalize_split("1,1,1,1"), data_error);
}

TEST_CASE("python float repr and json.dumps layout match Python for the description values") {
  CHECK(py_float_repr(0.949) == "0.949");
  CHECK(py_float_repr(1.0) == "1.0");
  CHECK(py_float_repr(1e-05) == "1e-05");
  CHECK(py_float_repr(0.0001) == "0.0001");
  CHECK(py_float_repr(1e16) == "1e+16");
  CHECK(py_float_repr(123456.5) == "123456.5");
  CHECK(py_float_repr(1.0 / 3) == "0.3333333333333333");
  nlohmann::ordered_json j = {{"a", 1}, {"b", {0, 0.5}}, {"c", nullptr}, {"d", "\xc3\xa9"}, {"e", nlohmann::ordered_json::array()}};
  CHECK(py_json_dumps(j) == "{\n    \"a\": 1,\n    \"b\": [\n        0,\n        0.5\n    ],\n    \"c\": null,\n"
                            "    \"d\": \"\\u00e9\",\n    \"e\": []\n}");
  // RFC 1321 test suite values.
  CHECK(md5_hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(md5_hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890") ==
        "57edf4a22be3c955ac49da2e2107b67a");
}

TEST_CASE("the sample index walks documents sharing one extra token, as in a hand-worked case") {
  // sizes 5, 3, 4 in document order 0,1,2; L = 4, X = 1: T = 12, (12 - 1) / 4 = 2 samples.
  const std::vector<std::int32_t> sizes = {5, 3, 4};
  const std::vector<std::int32_t> doc = {0, 1, 2};
  auto s = build_sample_index(sizes, doc, 4, 1, 12, true, 1);
  // row 1: need 5 from doc 0 (5 tokens) -> (0, 4); row 2: doc0 has 1 left, doc1 3, doc2 needs 1 -> (2, 0).
  CHECK(s.values() == std::vector<std::int64_t>{0, 0, 0, 4, 2, 0});
  CHECK(!s.wide());
  // The same rows held in int64 (the dtype Megatron takes when values may pass int32).
  auto w = build_sample_index(sizes, doc, 4, 1, 12, true, 1, /*wide=*/true);
  CHECK(w.wide());
  CHECK(w.values() == s.values());
  // Without dropping the partial last sample: ceil(11 / 4) = 3 rows, the last ends at doc 2's end - X.
  auto p = build_sample_index(sizes, doc, 4, 1, 12, false, 1);
  CHECK(p.values() == std::vector<std::int64_t>{0, 0, 0, 4, 2, 0, 2, 3});
}

TEST_CASE("the legacy stream's MT19937 draws std::mt19937's words over several blocks") {
  for (std::uint32_t seed : {0u, 1u, 1234u, 0xffffffffu}) {
    mt19937_stream ours(seed);
    std::mt19937 standard(seed);
    int differ = 0;
    for (int i = 0; i < 5 * 624 + 7; ++i) differ += ours() != static_cast<std::uint32_t>(standard()) ? 1 : 0;
    INFO("seed " << seed);
    CHECK(differ == 0);
  }
}

TEST_CASE("numpy's legacy shuffle and default_rng integers are reproduced bit for bit") {
  auto dir = t::scratch_dir("numpy_random");
  nlohmann::json spec = {{"shuffles", {{1234, 1000}, {7, 1}, {0, 70000}}}, {"rng_seed", 0}, {"rng_size", 100000}};
  auto r = t::megatron_reference("numpy_random", spec, dir);
  int k = 0;
  for (auto [seed, n] : std::vector<std::pair<std::uint32_t, int>>{{1234, 1000}, {7, 1}, {0, 70000}}) {
    legacy_random_state rs(seed);
    std::vector<std::int32_t> a(static_cast<std::size_t>(n));
    std::iota(a.begin(), a.end(), 0);
    rs.shuffle(std::span<std::int32_t>(a));
    std::vector<std::uint32_t> b(static_cast<std::size_t>(n));
    std::iota(b.begin(), b.end(), 0u);
    rs.shuffle(std::span<std::uint32_t>(b));
    CHECK(nlohmann::json(a) == r["shuffles"][k][0]);
    CHECK(nlohmann::json(b) == r["shuffles"][k][1]);
    ++k;
  }
  CHECK(nlohmann::json(mock_token_source(50256).sequence_lengths()) == r["lengths"]);
}

namespace {

// A dataset of `docs` documents with lengths drawn from a fixed std::mt19937 (documents end with eod 0).
void make_dataset(const std::string& prefix, int docs, std::uint32_t seed, int max_len) {
  std::mt19937 g(seed);
  indexed_dataset_builder b(bin_path(prefix), dtype::uint16);
  for (int d = 0; d < docs; ++d) {
    const int len = 1 + static_cast<int>(g() % static_cast<std::uint32_t>(max_len));
    std::vector<std::int64_t> tokens;
    for (int k = 0; k < len - 1; ++k) tokens.push_back(1 + static_cast<std::int64_t>(g() % 500));
    tokens.push_back(0);
    b.add_item(tokens);
    b.end_document();
  }
  b.finalize(idx_path(prefix));
}

std::optional<data_blend> blend_from(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  data_blend b;
  b.prefixes = j["prefixes"].get<std::vector<std::string>>();
  if (j.contains("weights") && !j["weights"].is_null()) b.weights = j["weights"].get<std::vector<double>>();
  return b;
}

gpt_dataset_config config_from(const nlohmann::json& spec) {
  gpt_dataset_config c;
  c.sequence_length = spec["seq_length"];
  c.random_seed = spec["seed"];
  if (spec.contains("split")) c.split = spec["split"].get<std::string>();
  if (spec.contains("blend")) c.blend = blend_from(spec["blend"]);
  if (spec.contains("blend_per_split"))
    for (int s = 0; s < 3; ++s) c.blend_per_split[s] = blend_from(spec["blend_per_split"][s]);
  c.path_to_cache = spec["cache"].get<std::string>();
  c.eod = spec["tokenizer"]["eod"];
  if (!spec["tokenizer"]["pad"].is_null()) c.pad = spec["tokenizer"]["pad"].get<std::int64_t>();
  c.tokenizer_identifiers = spec["tokenizer"]["identifiers"];
  c.reset_position_ids = spec.value("reset_position_ids", false);
  c.reset_attention_mask = spec.value("reset_attention_mask", false);
  c.eod_mask_loss = spec.value("eod_mask_loss", false);
  c.create_attention_mask = spec.value("create_attention_mask", true);
  c.add_extra_token_to_sequence = spec.value("add_extra_token", true);
  c.drop_last_partial_validation_sequence = spec.value("drop_last_valid", true);
  return c;
}

std::array<std::optional<std::int64_t>, 3> sizes_from(const nlohmann::json& j) {
  std::array<std::optional<std::int64_t>, 3> s;
  for (int i = 0; i < 3; ++i)
    if (!j[i].is_null()) s[i] = j[i].get<std::int64_t>();
  return s;
}

nlohmann::json item_json(const gpt_sample& s, bool blended) {
  nlohmann::json j = {{"tokens", s.tokens}, {"labels", s.labels}, {"loss_mask", s.loss_mask},
                      {"position_ids", s.position_ids}};
  if (!s.attention_mask.empty()) {
    const std::size_t L = s.tokens.size();
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t r = 0; r < L; ++r)
      rows.push_back(std::vector<int>(s.attention_mask.begin() + static_cast<std::ptrdiff_t>(r * L),
                                      s.attention_mask.begin() + static_cast<std::ptrdiff_t>((r + 1) * L)));
    j["attention_mask"] = nlohmann::json::array({rows});
  }
  if (blended) j["dataset_id"] = s.dataset_id;
  return j;
}

// Every file Megatron put in `theirs` exists in `ours` with identical bytes, and nothing more.
void check_same_cache(const std::string& theirs, const std::string& ours) {
  std::vector<std::string> a, b;
  for (auto& e : fs::directory_iterator(theirs)) a.push_back(e.path().filename().string());
  for (auto& e : fs::directory_iterator(ours)) b.push_back(e.path().filename().string());
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  REQUIRE(a == b);
  for (const auto& f : a) {
    INFO(f);
    CHECK(t::slurp(theirs + "/" + f) == t::slurp(ours + "/" + f));
  }
}

}  // namespace

TEST_CASE("GPT, blended and mock datasets match Megatron-Core's indices, cache files and items") {
  auto dir = t::scratch_dir("gpt_megatron");
  make_dataset(dir + "/a", 300, 1, 60);
  make_dataset(dir + "/b", 120, 2, 200);
  const nlohmann::json tok = {{"eod", 0}, {"pad", nullptr},
                              {"identifiers", {{"class", "_NullTokenizer"}, {"tokenizer_path", nlohmann::json::array()}, {"vocab_size", "501"}}}};
  const nlohmann::json items = {0, 1, 2, 7, 33, 100, 250};
  std::vector<nlohmann::json> cases = {
      // one prefix, several epochs (separate final epoch on train), a valid split with partial sequence
      {{"seed", 1234}, {"seq_length", 16}, {"split", "90,8,2"}, {"blend", {{"prefixes", {dir + "/a"}}}},
       {"sizes", {2500, 40, 3}}, {"drop_last_valid", false}},
      // masks and position resets, no extra token, pad id set
      {{"seed", 5}, {"seq_length", 24}, {"split", "90,10"}, {"blend", {{"prefixes", {dir + "/a"}}}},
       {"sizes", {300, 20, 0}}, {"reset_position_ids", true}, {"reset_attention_mask", true},
       {"eod_mask_loss", true}, {"add_extra_token", false}, {"pad_id", 7}},
      // weighted blend of two prefixes
      {{"seed", 99}, {"seq_length", 32}, {"split", "98,2,0"},
       {"blend", {{"prefixes", {dir + "/a", dir + "/b"}}, {"weights", {0.3, 0.7}}}},
       {"sizes", {500, 10, 0}}, {"create_attention_mask", false}},
      // unweighted blend, one epoch for valid
      {{"seed", 3}, {"seq_length", 20}, {"split", "80,20"}, {"blend", {{"prefixes", {dir + "/a", dir + "/b"}}}},
       {"sizes", {100, nullptr, nullptr}}},
      // per-split blends
      {{"seed", 11}, {"seq_length", 16},
       {"blend_per_split", {{{"prefixes", {dir + "/a"}}}, {{"prefixes", {dir + "/a", dir + "/b"}}, {"weights", {1, 3}}}, nullptr}},
       {"sizes", {200, 30, nullptr}}},
      // mock data
      {{"seed", 1234}, {"seq_length", 64}, {"sizes", {100, 10, 10}}},
  };
  nlohmann::json batch = nlohmann::json::array();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    auto& c = cases[k];
    c["tokenizer"] = tok;
    if (c.contains("pad_id")) c["tokenizer"]["pad"] = c["pad_id"];
    c["items"] = items;
    c["cache"] = dir + "/theirs" + std::to_string(k);
    batch.push_back({"gpt", c});
  }
  auto results = t::megatron_reference("batch", batch, dir);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    INFO("case " << k << ": " << cases[k].dump());
    auto spec = cases[k];
    const std::string ours = dir + "/ours" + std::to_string(k);
    spec["cache"] = ours;
    auto datasets = build_gpt_datasets(config_from(spec), sizes_from(spec["sizes"]));
    for (int s = 0; s < 3; ++s) {
      const auto& want = results[k]["splits"][s];
      INFO("split " << s);
      REQUIRE(want.is_null() == (datasets[s] == nullptr));
      if (!datasets[s]) continue;
      CHECK(datasets[s]->size() == want["length"].get<std::size_t>());
      const bool blended = want["class"] == "BlendedDataset";
      std::size_t n = 0;
      for (auto i : items) {
        if (i.get<std::size_t>() >= datasets[s]->size()) continue;
        CHECK(item_json(datasets[s]->get(i.get<std::size_t>()), blended) == want["items"][n]);
        ++n;
      }
    }
    check_same_cache(dir + "/theirs" + std::to_string(k), ours);
    // A second build loads our cache and yields the same samples.
    auto again = build_gpt_datasets(config_from(spec), sizes_from(spec["sizes"]));
    auto* g = dynamic_cast<gpt_dataset*>(again[0].get());
    if (g) CHECK(g->loaded_from_cache());
    CHECK(item_json(again[0]->get(1), false)["tokens"] == item_json(datasets[0]->get(1), false)["tokens"]);
  }
}

TEST_CASE("blending picks the dataset furthest below its weight and respects exhaustive sizes") {
  auto [di, dsi] = build_blending_indices({0.5, 0.25, 0.25}, 8);
  CHECK(di == std::vector<std::int16_t>{0, 1, 2, 0, 0, 1, 2, 0});
  CHECK(dsi == std::vector<std::int64_t>{0, 0, 0, 1, 2, 1, 1, 3});
  auto [ei, esi] = build_exhaustive_blending_indices({1, 3});
  CHECK(ei == std::vector<std::int16_t>{1, 0, 1, 1});
  CHECK(esi == std::vector<std::int64_t>{0, 0, 1, 2});
  auto sz = size_per_split_per_dataset({0.3, 0.7}, {1000, 10, std::nullopt}, 0.005);
  CHECK(sz[0][0] == 302);  // ceil(ceil(300) * 1.005) = ceil(301.5)
  CHECK(sz[1][0] == 704);  // ceil(700 * 1.005) = ceil(703.5)
  CHECK(sz[1][1] == 8);    // ceil(ceil(7) * 1.005)
  CHECK_FALSE(sz[0][2].has_value());
}
