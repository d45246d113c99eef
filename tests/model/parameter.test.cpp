// Parameters: Megatron-Core names, initialization as Megatron does it, weight-decay flags,
// seeding, and tensor-parallel shard copies.
#include "model/parameter.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

struct stats {
  double mean = 0, std = 0;
};

stats of(const model::parameter& p) {
  double s = 0, sq = 0;
  const float* v = p.value_as<float>();
  for (std::size_t i = 0; i < p.numel; ++i) s += v[i], sq += double(v[i]) * v[i];
  const double mean = s / p.numel;
  return {mean, std::sqrt(sq / p.numel - mean * mean)};
}

std::map<std::string, const model::parameter*> by_name(model::gpt_model& m) {
  std::map<std::string, const model::parameter*> out;
  for (const auto& p : m.parameters()) out[p.name] = &p;
  return out;
}

}  // namespace

TEST_CASE("weights start as Megatron initializes them") {
  auto c = test::gpt2_style();
  c.num_layers = 3, c.hidden_size = 64, c.ffn_hidden_size = 256, c.init_method_std = 0.02f;
  c.padded_vocab_size = 512;
  model::single_group tp;
  model::gpt_model m(c, tp);
  auto p = by_name(m);
  const double scaled = 0.02 / std::sqrt(2.0 * 3);
  CHECK(of(*p["embedding.word_embeddings.weight"]).std == Approx(0.02).epsilon(0.03));
  CHECK(of(*p["decoder.layers.1.self_attention.linear_qkv.weight"]).std ==
        Approx(0.02).epsilon(0.03));
  CHECK(of(*p["decoder.layers.1.mlp.linear_fc1.weight"]).std == Approx(0.02).epsilon(0.03));
  CHECK(of(*p["decoder.layers.1.self_attention.linear_proj.weight"]).std ==
        Approx(scaled).epsilon(0.03));
  CHECK(of(*p["decoder.layers.1.mlp.linear_fc2.weight"]).std == Approx(scaled).epsilon(0.03));
  for (const auto& [name, q] : p) {
    INFO(name);
    if (name.ends_with(".bias")) CHECK((of(*q).mean == 0.0 && of(*q).std == 0.0));
    if (name.ends_with("layernorm.weight")) CHECK((of(*q).mean == 1.0 && of(*q).std == 0.0));
    CHECK(q->no_weight_decay == (name.ends_with(".bias") || q->full_shape.size() == 1));
  }
  CHECK(p.count("output_layer.weight") == 0);  // tied
}

TEST_CASE("zero-centered gamma starts norm weights at zero and the seed changes the weights") {
  auto c = test::llama_style();
  c.apply_layernorm_1p = true;
  model::single_group tp;
  model::gpt_model a(c, tp);
  for (const auto& p : a.parameters())
    if (p.name.ends_with("layernorm.weight")) CHECK(of(p).std == 0.0);
  auto pa = by_name(a);
  CHECK(pa.count("output_layer.weight") == 1);
  CHECK(pa.count("embedding.position_embeddings.weight") == 0);  // rope
  model::gpt_model same(c, tp);
  c.seed += 1;
  model::gpt_model other(c, tp);
  const auto& w = *pa["decoder.layers.0.mlp.linear_fc1.weight"];
  const auto& w_same = *by_name(same)["decoder.layers.0.mlp.linear_fc1.weight"];
  const auto& w_other = *by_name(other)["decoder.layers.0.mlp.linear_fc1.weight"];
  CHECK(test::copy_of<float>(w.value) == test::copy_of<float>(w_same.value));
  CHECK(test::copy_of<float>(w.value) != test::copy_of<float>(w_other.value));
}

TEST_CASE("shards of every split kind reassemble the full tensor") {
  const std::vector<std::int64_t> shape = {8, 6};
  std::vector<float> full(48);
  for (int i = 0; i < 48; ++i) full[i] = float(i);
  for (auto split : {model::tp_split::rows, model::tp_split::columns, model::tp_split::row_halves}) {
    std::vector<float> back(48, -1.0f);
    for (int r = 0; r < 2; ++r) {
      std::vector<float> local(24);
      model::copy_shard(full.data(), local.data(), shape, split, r, 2);
      model::place_shard(local.data(), back.data(), shape, split, r, 2);
    }
    CHECK(back == full);
  }
  // SwiGLU's fc1: rank 1 of 2 holds gate rows 2..3 and up rows 6..7.
  std::vector<float> local(24);
  model::copy_shard(full.data(), local.data(), shape, model::tp_split::row_halves, 1, 2);
  CHECK(local[0] == 12.0f);
  CHECK(local[12] == 36.0f);
}

TEST_CASE("row segments split as the Mamba mixer's in_proj: each rank holds its block of every segment") {
  // [z 4; x 2; dt 2] rows of 3 elements: rank 1 of 2 holds z rows 2..3, x row 5 and dt row 7.
  const std::vector<std::int64_t> shape = {8, 3}, segments = {4, 2, 2};
  std::vector<float> full(24);
  for (int i = 0; i < 24; ++i) full[i] = float(i);
  std::vector<float> back(24, -1.0f);
  for (int r = 0; r < 2; ++r) {
    std::vector<float> local(12);
    model::copy_shard(full.data(), local.data(), shape, model::tp_split::row_segments, r, 2, segments);
    if (r == 1) CHECK(local == std::vector<float>{6, 7, 8, 9, 10, 11, 15, 16, 17, 21, 22, 23});
    model::place_shard(local.data(), back.data(), shape, model::tp_split::row_segments, r, 2, segments);
  }
  CHECK(back == full);
  CHECK(model::shard_shape({8, 1, 4}, model::tp_split::row_segments, 2) == std::vector<std::int64_t>{4, 1, 4});
}

TEST_CASE("a store drops the values of parameters held elsewhere and packs the rest, each still bound") {
  // a [2 x 3], b [4], c [5], d [2]: dropping b and d leaves a and c packed one after the other.
  model::parameter_store store;
  store.add("a", {2, 3}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.add("b", {4}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.add("c", {5}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.add("d", {2}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.allocate(5, 0, 1);
  REQUIRE(store.flat_numel() == 17);
  const auto all = store.values<float>();
  const std::vector<float> whole(all.begin(), all.end());
  store.drop_values({3, 1});
  CHECK(store.flat_numel() == 17);  // the layout (and the gradients) stay whole
  CHECK(store.grad_tensor().numel() == 17);
  CHECK(store.held(0, 17) == std::vector<model::held_range>{{0, 6, 0}, {10, 15, 6}});
  CHECK(store.held(8, 12) == std::vector<model::held_range>{{10, 12, 6}});
  const auto kept = store.values<float>();
  REQUIRE(kept.size() == 11);
  std::vector<float> want(whole.begin(), whole.begin() + 6);
  want.insert(want.end(), whole.begin() + 10, whole.begin() + 15);
  CHECK(std::vector<float>(kept.begin(), kept.end()) == want);
  CHECK(store[0].value_as<float>() == kept.data());
  CHECK(store[0].value.shape == std::vector<std::int64_t>{2, 3});
  CHECK(store[2].value_as<float>() == kept.data() + 6);
  CHECK(store[1].value.data == nullptr);
  CHECK(store[3].value.data == nullptr);
  // Only from the whole layout.
  CHECK_THROWS_AS(store.drop_values({0}), std::logic_error);
}

TEST_CASE("a store keeps only its values shard and binds its parameters to a whole layout for a compute") {
  // Two parameters of 3 and 4 elements: the flat layout is 7, padded to 8 for two shards.
  model::parameter_store store;
  store.add("a", {3}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.add("b", {4}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.allocate(5, 0, 1);
  REQUIRE(store.flat_numel() == 7);
  const auto all = store.values<float>();
  const std::vector<float> whole(all.begin(), all.end());
  store.keep_values_shard({{4, 7, 0}}, 4);  // the second shard: b's last 3 elements and one of padding
  CHECK(store.held(0, 7) == std::vector<model::held_range>{{4, 7, 0}});
  CHECK(store.held(2, 5) == std::vector<model::held_range>{{4, 5, 0}});
  CHECK(store.held(0, 4).empty());
  const auto kept = store.values<float>();
  REQUIRE(kept.size() == 4);
  CHECK(std::vector<float>(kept.begin(), kept.begin() + 3) == std::vector<float>(whole.begin() + 4, whole.end()));
  CHECK(kept[3] == 0.0f);
  CHECK(store[0].value.data == nullptr);  // unbound outside a compute
  std::vector<float> gathered(whole);
  gathered.push_back(0.0f);
  store.bind_values(tensor::view_of(std::span<float>(gathered)));
  CHECK(store[1].value_as<float>() == gathered.data() + 3);
  CHECK(store[1].value.shape == std::vector<std::int64_t>{4});
  store.unbind_values();
  CHECK(store[1].value.data == nullptr);
  // Sharded gradients: the buffer is dropped and bound only for a backward.
  store.drop_grads();
  store.zero_grad();  // nothing to zero
  std::vector<float> grads(8, 0.0f);
  store.bind_grads(tensor::view_of(std::span<float>(grads)));
  CHECK(store[0].grad_as<float>() == grads.data());
  std::vector<float> short_layout(6, 0.0f);
  CHECK_THROWS_AS(store.bind_grads(tensor::view_of(std::span<float>(short_layout))), std::logic_error);
}

TEST_CASE("a store keeps a values shard of two regions, each slice at its own place") {
  // Dense a (3) and b (4), then an expert e (5): flat 12, the experts from 7. The dense region
  // is sharded over 2 (padded to 8: this rank's slice [4, 8) holds b's last 3 and a padding
  // element), the experts over 2 (padded to 6: slice [3, 6) of them, flat [10, 12) and padding).
  model::parameter_store store;
  store.add("a", {3}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store.add("b", {4}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  const int e = store.add("e", {5}, model::tp_split::replicated, model::init_kind::normal, 1.0);
  store[e].expert = true;
  store.allocate(5, 0, 1);
  REQUIRE(store.expert_begin() == 7);
  const auto all = store.values<float>();
  const std::vector<float> whole(all.begin(), all.end());
  store.keep_values_shard({{4, 7, 0}, {10, 12, 4}}, 7);
  const auto kept = store.values<float>();
  REQUIRE(kept.size() == 7);
  const std::vector<float> want{whole[4], whole[5], whole[6], 0.0f, whole[10], whole[11], 0.0f};
  CHECK(std::vector<float>(kept.begin(), kept.end()) == want);
  CHECK(store.held(store[e].offset, store[e].offset + store[e].numel) == std::vector<model::held_range>{{10, 12, 4}});
  CHECK(store.held(5, 11) == std::vector<model::held_range>{{5, 7, 1}, {10, 11, 4}});
  CHECK_THROWS_AS(store.keep_values_shard({{10, 13, 0}}, 3), std::logic_error);  // past the layout
}
