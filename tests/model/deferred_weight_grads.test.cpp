// The deferred weight-gradient queue (model/deferred_weight_grads.hpp) alone, and under a model
// chunk: a backward that collects leaves the weight gradients of the linears (fp8 ones too), norms
// and embedding tables untouched, and running the queues later, micro-batch by micro-batch, gives
// the immediate backward's gradients bit for bit even when the next micro-batch's forward has
// overwritten the layers' activations in between.
#include "model/deferred_weight_grads.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

TEST_CASE("the queue runs work at once unless collecting, then on copies, per micro-batch in the order added") {
  model::deferred_weight_grads q;
  std::vector<float> x{1, 2, 3};
  std::vector<std::string> ran;
  auto record = [&](std::string tag) {
    return [&ran, tag](std::span<const tensor::const_tensor_view> in) {
      ran.push_back(tag + ":" + std::to_string(int(in[0].host<float>()[0])));
    };
  };
  q.add({test::view(x)}, record("now"));
  CHECK(ran == std::vector<std::string>{"now:1"});
  q.begin_collecting(0);
  q.add({test::view(x)}, record("a"));
  x[0] = 7;  // the next micro-batch overwrites the buffer: the queue kept its own copy
  q.add({test::view(x)}, record("b"));
  q.begin_collecting(1);
  q.add({test::view(x)}, record("c"));
  q.stop_collecting();
  CHECK(q.pending() == 3);
  CHECK(q.pending_bytes() == 3 * 3 * 4);
  q.run(1);
  CHECK(ran == std::vector<std::string>{"now:1", "c:7"});
  q.run(0);
  CHECK(ran == std::vector<std::string>{"now:1", "c:7", "a:1", "b:7"});
  CHECK(q.pending() == 0);
  CHECK(q.pending_bytes() == 0);
  q.run(5);  // nothing queued: nothing happens
  CHECK(ran.size() == 4);
  // An empty input (an RMSNorm has no mean) is queued as an empty view, not copied.
  q.begin_collecting(2);
  bool empty_seen = false;
  q.add({test::view(x), tensor::const_tensor_view{}}, [&](std::span<const tensor::const_tensor_view> in) {
    empty_seen = in.size() == 2 && in[1].data == nullptr && in[0].data != nullptr;
  });
  q.stop_collecting();
  CHECK(q.pending_bytes() == 3 * 4);
  q.run(2);
  CHECK(empty_seen);
}

namespace {

std::vector<float> grad_of(model::gpt_chunk& chunk, const std::string& name) {
  for (auto& p : chunk.parameters())
    if (p.name == name) return test::copy_of<float>(p.grad);
  FAIL("no parameter " << name);
  return {};
}

bool all_zero(const std::vector<float>& v) {
  for (float x : v)
    if (x != 0.0f) return false;
  return true;
}

// Runs F0 B0 F1 B1 on two copies of a chunk (one chunk holding the whole model), the second with
// its backwards collecting and W0 W1 at the end (ZB-H1's order on such a stage): every gradient
// must come out the same bit for bit, and `deferred_names` must be untouched before the W passes.
void check_deferred_equals_immediate(const model::gpt_model_config& c, const std::vector<std::string>& deferred_names) {
  model::single_group tp;
  std::vector<test::batch_data> batches;
  for (int i = 0; i < 2; ++i) batches.push_back(test::make_batch(2, c.seq_length, c.padded_vocab_size, 21 + i));
  model::gpt_chunk immediate(c, tp, {0, c.num_layers, true, true}), deferred(c, tp, {0, c.num_layers, true, true});
  for (int i = 0; i < 2; ++i) {
    immediate.forward(i, batches[i].view(), {}, {}, true, true, 0.5, 100 + i);
    immediate.backward(i, {}, {});
  }
  auto& queue = deferred.store().weight_grads();
  for (int i = 0; i < 2; ++i) {
    deferred.forward(i, batches[i].view(), {}, {}, true, true, 0.5, 100 + i);
    queue.begin_collecting(i);
    deferred.backward(i, {}, {});
    queue.stop_collecting();
  }
  for (const auto& name : deferred_names) {
    INFO(name);
    CHECK(all_zero(grad_of(deferred, name)));
  }
  CHECK(queue.pending() > 0);
  CHECK(queue.pending_bytes() > 0);
  queue.run(0);
  queue.run(1);
  CHECK(queue.pending() == 0);
  int compared = 0;
  for (auto& p : immediate.parameters()) {
    INFO(p.name);
    const auto want = test::copy_of<float>(p.grad), got = grad_of(deferred, p.name);
    REQUIRE(want.size() == got.size());
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    CHECK_FALSE(all_zero(want));
    ++compared;
  }
  CHECK(compared > 10);
}

}  // namespace

TEST_CASE("a chunk's deferred weight gradients, run after the next micro-batch's forward, equal the immediate backward's bit for bit") {
  for (auto c : {test::gpt2_style(), test::llama_style()}) {
    c.num_layers = 2;
    c.hidden_dropout = 0.1f;
    // Linears, norms and the embedding tables all wait for the W pass; a word table tied to the
    // output layer (GPT-2 style), whose gradient also accumulates in the forward, does not.
    REQUIRE(c.untie_embeddings_and_output_weights == (c.position_embedding_type != model::position_embedding_kind::learned_absolute));
    const char* table = c.untie_embeddings_and_output_weights ? "embedding.word_embeddings.weight"
                                                            : "embedding.position_embeddings.weight";
    check_deferred_equals_immediate(c, {"decoder.layers.1.mlp.linear_fc1.weight", "decoder.layers.0.self_attention.linear_qkv.weight",
                                        "decoder.layers.0.input_layernorm.weight", "decoder.layers.1.pre_mlp_layernorm.weight",
                                        "decoder.final_layernorm.weight", table});
  }
}

TEST_CASE("fp8 linears' deferred weight gradients, on copies of their quantized operands, equal the immediate backward's under every recipe") {
  auto c = test::llama_style();
  c.num_layers = 2, c.hidden_size = 32, c.ffn_hidden_size = 48, c.num_attention_heads = 4, c.num_query_groups = 4;
  c.seq_length = 16, c.max_position_embeddings = 16, c.padded_vocab_size = 64, c.init_method_std = 0.05f;
  c.params_dtype = tensor::dtype::float32;
  c.fp8.enabled = true, c.fp8.fp8 = model::fp8_format::hybrid;
  c.fp8.fp8_amax_history_len = 4, c.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
  using R = model::fp8_recipe;
  for (auto [recipe, wgrad] : {std::pair{R::delayed, true}, {R::delayed, false}, {R::tensorwise, true}, {R::mxfp8, true},
                               {R::blockwise, true}}) {
    INFO("recipe " << int(recipe) << " fp8_wgrad " << wgrad);
    c.fp8.recipe = recipe, c.fp8.fp8_wgrad = wgrad;
    check_deferred_equals_immediate(c, {"decoder.layers.0.self_attention.linear_qkv.weight", "decoder.layers.1.mlp.linear_fc2.weight"});
  }
}
