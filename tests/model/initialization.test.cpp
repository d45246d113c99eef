// Megatron's initialization flags: --embedding-init-method-std (the embeddings' normal std and
// their weight-decay exemption) and --init-method-xavier-uniform (bounds, spread and which weights),
// checked by statistics of large enough tensors; xavier's fans are the full weight's at any tp.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>

#include "model/parameter.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

struct stats {
  double mean = 0, std = 0, max_abs = 0;
};

stats of(const model::parameter& p) {
  double s = 0, sq = 0, top = 0;
  const float* v = p.value_as<float>();
  for (std::size_t i = 0; i < p.numel; ++i)
    s += v[i], sq += double(v[i]) * v[i], top = std::max(top, double(std::abs(v[i])));
  const double mean = s / double(p.numel);
  return {mean, std::sqrt(sq / double(p.numel) - mean * mean), top};
}

std::map<std::string, const model::parameter*> by_name(model::gpt_model& m) {
  std::map<std::string, const model::parameter*> out;
  for (const auto& p : m.parameters()) out[p.name] = &p;
  return out;
}

// An untied gpt2-style model with learned positions, big enough for 3% std checks.
model::gpt_model_config big() {
  auto c = test::gpt2_style();
  c.num_layers = 3, c.hidden_size = 64, c.ffn_hidden_size = 256, c.init_method_std = 0.02f;
  c.padded_vocab_size = 512, c.max_position_embeddings = 256, c.seq_length = 8;
  c.untie_embeddings_and_output_weights = true;
  return c;
}

bool is_embedding(const std::string& name) { return name.find("embedding") != std::string::npos; }
bool is_matrix(const model::parameter& p) { return p.full_shape.size() == 2; }

// Uniform(-b, b): every value inside, the largest near b, std b / sqrt(3), mean near 0.
void check_xavier(const model::parameter& p) {
  INFO(p.name);
  const double bound = std::sqrt(6.0 / double(p.full_shape[0] + p.full_shape[1]));
  const auto s = of(p);
  CHECK(s.max_abs <= bound);
  CHECK(s.max_abs >= 0.98 * bound);
  CHECK(s.std == Approx(bound / std::sqrt(3.0)).epsilon(0.03));
  CHECK(std::abs(s.mean) < 0.03 * bound);
}

}  // namespace

TEST_CASE("with --embedding-init-method-std the embeddings draw with that std and skip weight decay") {
  auto c = big();
  model::single_group tp;
  model::gpt_model plain(c, tp);
  c.embedding_init_method_std = 1.0f;
  model::gpt_model m(c, tp);
  for (const auto& [name, p] : by_name(m)) {
    INFO(name);
    if (is_embedding(name)) {
      CHECK(of(*p).std == Approx(1.0).epsilon(0.03));
      CHECK(p->no_weight_decay);
    } else {
      CHECK(p->no_weight_decay == (name.ends_with(".bias") || p->full_shape.size() == 1));
    }
  }
  CHECK(of(*by_name(m)["output_layer.weight"]).std == Approx(0.02).epsilon(0.03));
  CHECK(of(*by_name(m)["decoder.layers.0.mlp.linear_fc1.weight"]).std == Approx(0.02).epsilon(0.03));
  // Given equal to --init-method-std: the same values as without it, still exempt from decay.
  c.embedding_init_method_std = c.init_method_std;
  model::gpt_model same(c, tp);
  auto word = [](model::gpt_model& g) { return by_name(g)["embedding.word_embeddings.weight"]; };
  CHECK(test::copy_of<float>(word(same)->value) == test::copy_of<float>(word(plain)->value));
  CHECK(word(same)->no_weight_decay);
  CHECK_FALSE(word(plain)->no_weight_decay);
  // The tied word embedding (first and last stage share it) follows the same rule.
  c.untie_embeddings_and_output_weights = false, c.embedding_init_method_std = 1.0f;
  model::gpt_model tied(c, tp);
  CHECK(of(*word(tied)).std == Approx(1.0).epsilon(0.03));
  CHECK(word(tied)->no_weight_decay);
}

TEST_CASE("with --init-method-xavier-uniform every init_method weight is xavier uniform of its full shape") {
  auto c = big();
  c.init_method_xavier_uniform = true;
  model::single_group tp;
  model::gpt_model m(c, tp);
  int matrices = 0;
  for (const auto& p : m.parameters()) {
    INFO(p.name);
    if (is_matrix(p)) check_xavier(p), ++matrices;
    if (p.name.ends_with(".bias")) CHECK((of(p).mean == 0.0 && of(p).std == 0.0));
    if (p.name.ends_with("layernorm.weight")) CHECK((of(p).mean == 1.0 && of(p).std == 0.0));
  }
  CHECK(matrices == 3 + 4 * c.num_layers);  // word, position, output; qkv, proj, fc1, fc2 per layer
  // fc1 [256, 64] and fc2 [64, 256] share a bound; qkv [192, 64] has its own.
  auto p = by_name(m);
  CHECK(of(*p["decoder.layers.0.self_attention.linear_qkv.weight"]).max_abs >
        of(*p["decoder.layers.0.mlp.linear_fc1.weight"]).max_abs * 1.1);
  // A gated fc1 [2 * ffn, hidden] counts both halves in its fan.
  auto gated = c;
  gated.quick_geglu = true;
  model::gpt_model g(gated, tp);
  check_xavier(*by_name(g)["decoder.layers.0.mlp.linear_fc1.weight"]);
  CHECK(by_name(g)["decoder.layers.0.mlp.linear_fc1.weight"]->full_shape[0] == 2 * c.ffn_hidden_size);
}

TEST_CASE("with --no-initialization the init_method weights stay zero and norms and biases are set as usual") {
  auto c = big();
  c.skip_weight_init = true;
  c.add_bias_linear = true;
  model::single_group tp;
  model::gpt_model skipped(c, tp);
  c.skip_weight_init = false;
  model::gpt_model drawn(c, tp);
  auto initialized = by_name(drawn);
  int matrices = 0;
  for (const auto& [name, p] : by_name(skipped)) {
    INFO(name);
    const auto& q = *initialized.at(name);
    if (is_matrix(*p)) {
      ++matrices;
      CHECK(of(*p).max_abs == 0.0);
      CHECK(of(q).std > 0.005);  // drawn without the flag (the output layers' scaled std is 0.02 / sqrt(2 x 3))
    } else {  // norms' ones and biases' zeros
      CHECK(std::equal(p->value_as<float>(), p->value_as<float>() + p->numel, q.value_as<float>()));
    }
  }
  CHECK(matrices == 3 + 4 * c.num_layers);
}

TEST_CASE("with xavier, an embedding std that differs from --init-method-std keeps embeddings normal") {
  auto c = big();
  c.init_method_xavier_uniform = true, c.embedding_init_method_std = 0.5f;
  model::single_group tp;
  model::gpt_model m(c, tp);
  for (const auto& [name, p] : by_name(m)) {
    if (!is_matrix(*p)) continue;
    INFO(name);
    if (is_embedding(name)) {
      CHECK(of(*p).std == Approx(0.5).epsilon(0.03));
      CHECK(of(*p).max_abs > 3 * 0.5);  // a normal's tail, far past any xavier bound here
    } else {
      check_xavier(*p);
    }
  }
  // Megatron falls back to init_method when the embedding std equals --init-method-std.
  c.embedding_init_method_std = c.init_method_std;
  model::gpt_model same(c, tp);
  check_xavier(*by_name(same)["embedding.word_embeddings.weight"]);
}

TEST_CASE("xavier shards at tp = 2 are the tp = 1 weight's pieces, for every split") {
  const std::vector<std::int64_t> shape = {64, 48};
  for (auto split : {model::tp_split::rows, model::tp_split::columns, model::tp_split::row_halves}) {
    auto draw = [&](int rank, int size) {
      model::parameter_store store;
      store.set_xavier_uniform(true);
      store.add("w", shape, split, model::init_kind::normal, 0.02);
      store.allocate(5, rank, size);
      return test::copy_of<float>(store[0].value);
    };
    const auto whole = draw(0, 1);
    std::vector<float> back(whole.size(), 0.0f);
    for (int r = 0; r < 2; ++r) {
      const auto local = draw(r, 2);
      model::place_shard(local.data(), back.data(), shape, split, r, 2);
    }
    CHECK(back == whole);
    const double bound = std::sqrt(6.0 / (64 + 48));
    CHECK(*std::max_element(whole.begin(), whole.end()) <= bound);
    CHECK(*std::max_element(whole.begin(), whole.end()) >= 0.95 * bound);
  }
}
