// The deferred weight-gradient queue (model/deferred_weight_grads.hpp) alone, and under a model
// chunk: a backward that collects leaves the linears' weight gradients untouched, and running the
// queues later, micro-batch by micro-batch, gives the immediate backward's gradients bit for bit
// even when the next micro-batch's forward has overwritten the layers' activations in between.
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

}  // namespace

TEST_CASE("a chunk's deferred weight gradients, run after the next micro-batch's forward, equal the immediate backward's bit for bit") {
  for (auto c : {test::gpt2_style(), test::llama_style()}) {
    c.num_layers = 2;
    c.hidden_dropout = 0.1f;
    model::single_group tp;
    std::vector<test::batch_data> batches;
    for (int i = 0; i < 2; ++i) batches.push_back(test::make_batch(2, c.seq_length, c.padded_vocab_size, 21 + i));
    model::gpt_chunk immediate(c, tp, {0, 2, true, true}), deferred(c, tp, {0, 2, true, true});
    // 1F1B's order on the last stage: F0 B0 F1 B1; ZB-H1 adds W0 W1 at the end.
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
    // Linears, norms and the embedding tables all wait for the W pass; a word table tied to the
    // output layer (GPT-2 style), whose gradient also accumulates in the forward, does not.
    REQUIRE(c.untie_embeddings_and_output_weights == (c.position_embedding_type != model::position_embedding_kind::learned_absolute));
    const char* table = c.untie_embeddings_and_output_weights ? "embedding.word_embeddings.weight"
                                                            : "embedding.position_embeddings.weight";
    for (const std::string name : {"decoder.layers.1.mlp.linear_fc1.weight", "decoder.layers.0.self_attention.linear_qkv.weight",
                                   "decoder.layers.0.input_layernorm.weight", "decoder.layers.1.pre_mlp_layernorm.weight",
                                   "decoder.final_layernorm.weight", table}) {
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
}
