// Activation recomputation (Megatron's --recompute-*): the groups a chunk's layers are cut into,
// then whole runs with and without recomputation compared bit for bit (losses and every
// gradient on every rank), with dropout on, in fp32 and bf16, on one rank and under tensor and
// sequence parallelism, on one chunk (each backward right after its forward) and on two pipeline
// chunks with every micro-batch in flight. The activation peak of the memory ledger must drop.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "model/local_group.hpp"
#include "model/recompute.hpp"
#include "tensor/memory_ledger.hpp"
#include "tests/model/model_fixtures.hpp"
#include "tests/tools/rank_threads.hpp"

using namespace mactor;
using model::recompute_config;
using model::recompute_granularity;
using model::recompute_method;

TEST_CASE("recompute groups: uniform cuts groups of n layers, block checkpoints the first n") {
  using groups = std::vector<model::layer_group>;
  auto as_tuples = [](const groups& g) {
    std::vector<std::tuple<int, int, bool>> t;
    for (const auto& x : g) t.emplace_back(x.begin, x.end, x.checkpointed);
    return t;
  };
  recompute_config c;
  CHECK(as_tuples(model::recompute_groups(c, 3)) ==
        std::vector<std::tuple<int, int, bool>>{{0, 1, false}, {1, 2, false}, {2, 3, false}});
  c.granularity = recompute_granularity::full;
  c.num_layers = 2;
  CHECK(as_tuples(model::recompute_groups(c, 5)) ==
        std::vector<std::tuple<int, int, bool>>{{0, 2, true}, {2, 4, true}, {4, 5, true}});
  c.method = recompute_method::block;
  CHECK(as_tuples(model::recompute_groups(c, 3)) ==
        std::vector<std::tuple<int, int, bool>>{{0, 1, true}, {1, 2, true}, {2, 3, false}});
  c.num_layers = 0;
  CHECK(!model::validate(c, 1, false).empty());
  c.num_layers = 1, c.distribute_saved_activations = true;
  CHECK(model::validate(c, 2, false).empty());
  CHECK(!model::validate(c, 1, false).empty());
  CHECK(!model::validate(c, 2, true).empty());
}

namespace {

constexpr int micro_batches = 3, micro_batch_size = 2;

struct outcome {
  std::vector<double> losses;                      // per rank
  std::vector<std::vector<std::uint8_t>> grads;    // per rank and chunk: the gradient bytes
  std::int64_t activation_peak = 0;                // ledger bytes above the start
};

// One rank: with one chunk each backward follows its forward; with more, every forward first.
double drive(std::vector<model::gpt_chunk>& chunks, const std::vector<test::batch_data>& batches) {
  double loss = 0;
  const std::int64_t n = std::int64_t(chunks.front().activation_numel(micro_batch_size));
  const auto type = chunks.front().dtype();
  auto activation = [&] { return tensor::tensor(tensor::shape_type{n}, type, tensor::memory_kind::communication); };
  std::vector<std::vector<tensor::tensor>> acts(micro_batches);
  for (auto& per_mb : acts)
    for (std::size_t s = 0; s < chunks.size(); ++s) per_mb.push_back(activation());
  tensor::tensor g_out = activation(), g_in = activation();
  auto backward = [&](int i) {
    for (std::size_t s = chunks.size(); s-- > 0;) {
      chunks[s].backward(i, s + 1 == chunks.size() ? tensor::tensor_view{} : g_out.view(),
                         s == 0 ? tensor::tensor_view{} : g_in.view());
      std::swap(g_out, g_in);
    }
  };
  for (int i = 0; i < micro_batches; ++i) {
    for (std::size_t s = 0; s < chunks.size(); ++s) {
      const auto in = s == 0 ? tensor::tensor_view{} : acts[i][s - 1].view();
      loss += chunks[s].forward(i, batches[i].view(), in, acts[i][s].view(), true, true, 0.05,
                                100 + i).loss_sum;
    }
    if (chunks.size() == 1) backward(i);
  }
  if (chunks.size() > 1)
    for (int i = 0; i < micro_batches; ++i) backward(i);
  for (auto& c : chunks) c.all_reduce_sequence_parallel_grads();
  return loss;
}

outcome run(model::gpt_model_config c, int tp_size, int stages) {
  std::vector<test::batch_data> batches;
  for (int i = 0; i < micro_batches; ++i)
    batches.push_back(test::make_batch(micro_batch_size, c.seq_length, c.padded_vocab_size, 5 + i));
  auto& ledger = tensor::memory_ledger::host();
  const auto start = ledger.usage(tensor::memory_kind::activations).current;
  ledger.reset_peaks();
  auto groups = model::make_local_groups(tp_size);
  std::vector<std::vector<model::gpt_chunk>> ranks(tp_size);
  outcome out;
  out.losses.resize(tp_size);
  test::on_rank_threads(tp_size, [&](int r) {
    auto rc = c;
    rc.tensor_model_parallel_size = tp_size, rc.tensor_model_parallel_rank = r;
    const int per = c.num_layers / stages;
    ranks[r].reserve(stages);
    for (int s = 0; s < stages; ++s)
      ranks[r].emplace_back(rc, *groups[r], model::chunk_layout{s * per, (s + 1) * per, s == 0, s == stages - 1});
    out.losses[r] = drive(ranks[r], batches);
  });
  out.activation_peak = ledger.usage(tensor::memory_kind::activations).peak - start;
  for (auto& chunks : ranks)
    for (auto& chunk : chunks) {
      const auto& g = chunk.store().grad_tensor();
      const auto* bytes = static_cast<const std::uint8_t*>(g.view().data);
      out.grads.emplace_back(bytes, bytes + g.nbytes());
    }
  return out;
}

model::gpt_model_config with_dropout(model::gpt_model_config c, int layers) {
  c.num_layers = layers;
  c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
  return c;
}

recompute_config full(recompute_method method, int n, bool distribute = false) {
  recompute_config r;
  r.granularity = recompute_granularity::full;
  r.method = method, r.num_layers = n, r.distribute_saved_activations = distribute;
  return r;
}

recompute_config selective(bool core_attn, bool layernorm, bool mlp) {
  recompute_config r;
  r.granularity = recompute_granularity::selective;
  r.core_attn = core_attn, r.layernorm = layernorm, r.mlp = mlp;
  return r;
}

void check_bitwise(const outcome& got, const outcome& want) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (std::size_t r = 0; r < want.losses.size(); ++r) CHECK(got.losses[r] == want.losses[r]);
  REQUIRE(got.grads.size() == want.grads.size());
  for (std::size_t i = 0; i < want.grads.size(); ++i) {
    INFO("rank/chunk " << i);
    CHECK(got.grads[i] == want.grads[i]);
  }
}

}  // namespace

TEST_CASE("recomputed runs give the plain run's losses and gradients bit for bit, with less activation memory") {
  struct layout {
    const char* name;
    int tp, stages;
    bool sequence_parallel;
  };
  const layout layouts[] = {{"one rank, one chunk", 1, 1, false},
                            {"one rank, two chunks in flight", 1, 2, false},
                            {"tp2", 2, 1, false},
                            {"tp2 with sequence parallelism, two chunks", 2, 2, true}};
  struct variant {
    const char* name;
    recompute_config config;
    bool needs_tp;
  };
  const variant variants[] = {
      {"full uniform 1", full(recompute_method::uniform, 1), false},
      {"full uniform 2", full(recompute_method::uniform, 2), false},
      {"full block 1", full(recompute_method::block, 1), false},
      {"full uniform 1, distributed", full(recompute_method::uniform, 1, true), true},
      {"selective core_attn", selective(true, false, false), false},
      {"selective layernorm", selective(false, true, false), false},
      {"selective mlp", selective(false, false, true), false},
      {"selective core_attn, layernorm, mlp", selective(true, true, true), false}};
  for (auto dtype : {tensor::dtype::float32, tensor::dtype::bfloat16})
    for (const auto& base : {test::llama_style(), test::gpt2_style()})
      for (const auto& l : layouts) {
        auto c = with_dropout(base, 4);
        c.seq_length = 6, c.max_position_embeddings = 8;  // divisible by tp under sequence parallelism
        c.params_dtype = dtype;
        c.sequence_parallel = l.sequence_parallel;
        const auto plain = run(c, l.tp, l.stages);
        for (const auto& v : variants) {
          if (v.needs_tp && (l.tp < 2 || l.sequence_parallel)) continue;
          INFO(tensor::short_name(dtype) << ", " << (base.swiglu ? "llama" : "gpt2") << ", " << l.name
                                   << ", " << v.name);
          c.recompute = v.config;
          const auto recomputed = run(c, l.tp, l.stages);
          check_bitwise(recomputed, plain);
          CHECK(recomputed.activation_peak < plain.activation_peak);
          c.recompute = {};
        }
      }
}

TEST_CASE("full recomputation of one layer at a time keeps far fewer activation bytes than none") {
  auto c = with_dropout(test::gpt2_style(), 8);
  c.seq_length = 16, c.max_position_embeddings = 16;
  const auto plain = run(c, 1, 1);
  c.recompute = full(recompute_method::uniform, 1);
  const auto recomputed = run(c, 1, 1);
  check_bitwise(recomputed, plain);
  // Eight layers' activations against the eight layer inputs plus one layer's activations.
  CHECK(double(recomputed.activation_peak) < 0.4 * double(plain.activation_peak));
}

TEST_CASE("with fp8 linears (delayed and mxfp8 recipes) recomputation reuses the forward's scales: losses and gradients bit for bit") {
  for (auto recipe : {model::fp8_recipe::delayed, model::fp8_recipe::mxfp8})
    for (const int stages : {1, 2}) {
      auto c = with_dropout(test::gpt2_style(), 4);
      c.seq_length = 32, c.max_position_embeddings = 32, c.params_dtype = tensor::dtype::bfloat16;
      c.fp8.enabled = true, c.fp8.fp8 = model::fp8_format::hybrid, c.fp8.recipe = recipe;
      c.fp8.fp8_amax_history_len = 4, c.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
      const auto plain = run(c, 1, stages);
      for (const auto& r : {full(recompute_method::uniform, 2), selective(true, true, true)}) {
        INFO((recipe == model::fp8_recipe::delayed ? "delayed" : "mxfp8") << ", " << stages << " chunks, "
                                                                            << (r.full() ? "full" : "selective"));
        c.recompute = r;
        check_bitwise(run(c, 1, stages), plain);
        c.recompute = {};
      }
    }
}

TEST_CASE("recomputation with the attention variants (learnable sink, window, per-layer RoPE) is bit for bit") {
  auto c = with_dropout(test::llama_style(), 4);
  c.seq_length = 6, c.max_position_embeddings = 8;
  c.softmax_type = model::softmax_kind::learnable;
  c.window_size = {2, 0}, c.window_attn_skip_freq.every = 2;
  c.no_rope_freq.every = 2, c.rotary_interleaved = true;
  for (int tp : {1, 2}) {
    INFO("tp " << tp);
    const auto plain = run(c, tp, 2);
    for (const auto& r : {selective(true, false, false), full(recompute_method::uniform, 1)}) {
      c.recompute = r;
      check_bitwise(run(c, tp, 2), plain);
      c.recompute = {};
    }
  }
}

TEST_CASE("recomputation with multi-latent attention (selective core_attn, full) is bit for bit", "[mla]") {
  auto c = with_dropout(test::llama_style(), 4);
  c.seq_length = 6, c.max_position_embeddings = 8, c.qk_layernorm = true, c.window_size = {2, 0};
  c.mla.enabled = true, c.mla.q_lora_rank = 12, c.mla.kv_lora_rank = 10;
  c.mla.qk_head_dim = 6, c.mla.qk_pos_emb_head_dim = 4, c.mla.v_head_dim = 5;
  for (auto dtype : {tensor::dtype::float32, tensor::dtype::bfloat16})
    for (bool sp : {false, true}) {
      c.params_dtype = dtype, c.sequence_parallel = sp;
      INFO(tensor::short_name(dtype) << (sp ? ", tp 2 sequence parallel" : ", tp 2"));
      const auto plain = run(c, 2, 2);
      for (const auto& r : {selective(true, true, false), full(recompute_method::uniform, 1)}) {
        c.recompute = r;
        const auto recomputed = run(c, 2, 2);
        check_bitwise(recomputed, plain);
        CHECK(recomputed.activation_peak < plain.activation_peak);
        c.recompute = {};
      }
    }
}
