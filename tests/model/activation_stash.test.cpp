// The activation stash against no stash at all: a chunk that runs every micro-batch's forward
// before the backwards (its layers' activations parked in each slot's stash, then taken back)
// must give, bit for bit, the losses, outputs and gradients of the same chunk running each
// micro-batch's forward and backward in turn, for every layer kind (MoE with its router
// variants and expert parallelism, MLA, Mamba, MTP, context-parallel attention, fp8). A field a
// layer's carry() leaves out is then another micro-batch's: the numbers differ, or the backward
// finds it missing and throws.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "model/local_group.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

using bytes = std::vector<unsigned char>;

bytes bytes_of(tensor::const_tensor_view v) {
  bytes b(v.nbytes());
  if (!b.empty()) std::memcpy(b.data(), v.data, b.size());
  return b;
}

// What one order of forwards and backwards gave.
struct outcome {
  std::vector<double> losses;
  std::vector<bytes> outputs, input_grads;
  std::map<std::string, bytes> grads;
};

struct rank_groups {
  model::group* tp;
  model::group* cp = nullptr;
  model::moe_groups moe = {};
};

// Deterministic activations or gradients handed to a chunk without the embedding or the loss.
std::vector<float> values(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(((i * 37 + std::size_t(seed) * 101) % 29) - 14) / 9.0f;
  return v;
}

// Every forward first, then the backwards in the same order (stash); or each micro-batch's
// forward and backward in turn (sequential). Gradients accumulate in the same order both ways.
outcome run(const model::gpt_model_config& c, const rank_groups& g, model::chunk_layout layout,
            const std::vector<test::batch_data>& batches, bool stash) {
  model::gpt_chunk chunk(c, *g.tp, layout, g.cp, g.moe);
  chunk.set_moe_aux_loss_scale(0.5);
  chunk.set_mtp_loss_scale(0.5);
  const int n = int(batches.size());
  const std::size_t numel = chunk.activation_numel(batches[0].micro_batch_size);
  std::vector<std::vector<float>> in(n), dout(n), out(n, std::vector<float>(numel)), din = out;
  for (int i = 0; i < n; ++i) in[i] = values(numel, 3 + i), dout[i] = values(numel, 17 + i);
  outcome o;
  auto forward = [&](int i) {
    const auto input = layout.pre_process ? tensor::const_tensor_view{} : test::view(in[i]);
    const auto output = layout.post_process ? tensor::tensor_view{} : test::view(out[i]);
    o.losses.push_back(chunk.forward(i, batches[std::size_t(i)].view(), input, output, true, true, 0.25, 100 + i).loss_sum);
  };
  auto backward = [&](int i) {
    chunk.backward(i, layout.post_process ? tensor::const_tensor_view{} : test::view(dout[i]),
                   layout.pre_process ? tensor::tensor_view{} : test::view(din[i]));
  };
  if (stash) {
    for (int i = 0; i < n; ++i) forward(i);
    CHECK(chunk.slots_in_flight() == std::size_t(n));
    for (int i = 0; i < n; ++i) backward(i);
  } else {
    for (int i = 0; i < n; ++i) forward(i), backward(i);
  }
  for (int i = 0; i < n; ++i) {
    o.outputs.push_back(bytes_of(test::view(out[i])));
    o.input_grads.push_back(bytes_of(test::view(din[i])));
  }
  for (auto& p : chunk.parameters()) o.grads[p.name] = bytes_of(p.grad);
  return o;
}

// The first byte where a and b differ (-1: the same bytes), so a failure prints one number.
long first_difference(const bytes& a, const bytes& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return long(i);
  return -1;
}

void check_same(const outcome& stashed, const outcome& sequential) {
  REQUIRE(stashed.losses.size() == sequential.losses.size());
  for (std::size_t i = 0; i < stashed.losses.size(); ++i) {
    INFO("micro-batch " << i);
    CHECK(std::memcmp(&stashed.losses[i], &sequential.losses[i], sizeof(double)) == 0);
    CHECK(first_difference(stashed.outputs[i], sequential.outputs[i]) == -1);
    CHECK(first_difference(stashed.input_grads[i], sequential.input_grads[i]) == -1);
  }
  REQUIRE(stashed.grads.size() == sequential.grads.size());
  bool some_nonzero = false;
  for (const auto& [name, g] : sequential.grads) {
    INFO(name);
    REQUIRE(stashed.grads.count(name));
    CHECK(first_difference(stashed.grads.at(name), g) == -1);
    for (unsigned char b : g) some_nonzero = some_nonzero || b != 0;
  }
  CHECK(some_nonzero);
}

// Three micro-batches on every layout, on `ranks` in-process ranks (each its own thread, its own
// batches unless the ranks share the micro-batch's sequence); `groups` gives rank r's groups.
void check_stash(const model::gpt_model_config& base, std::vector<model::chunk_layout> layouts, int ranks = 1,
                 std::function<model::gpt_model_config(model::gpt_model_config, int)> on_rank = {},
                 std::function<rank_groups(int, model::group&)> groups = {}, bool same_batches = false) {
  auto list = model::make_local_groups(ranks);
  std::vector<std::vector<std::pair<outcome, outcome>>> got(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      model::single_group one;
      const auto c = on_rank ? on_rank(base, r) : base;
      const rank_groups g = groups ? groups(r, *list[std::size_t(r)]) : rank_groups{&one};
      std::vector<test::batch_data> batches;
      for (int i = 0; i < 3; ++i)
        batches.push_back(test::make_batch(2, c.seq_length, c.padded_vocab_size, 31 + i + (same_batches ? 0 : 7 * r)));
      for (const auto& layout : layouts)
        got[std::size_t(r)].emplace_back(run(c, g, layout, batches, true), run(c, g, layout, batches, false));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r)
    for (std::size_t l = 0; l < layouts.size(); ++l) {
      INFO("rank " << r << ", layout " << l);
      check_same(got[std::size_t(r)][l].first, got[std::size_t(r)][l].second);
    }
}

const std::vector<model::chunk_layout> whole_and_middle = {{0, 3, true, true}, {0, 3, false, false}};

model::gpt_model_config with_dropout(model::gpt_model_config c) {
  c.params_dtype = tensor::dtype::float32;
  c.attention_dropout = 0.2f, c.hidden_dropout = 0.15f;
  return c;
}

model::gpt_model_config moe_model() {
  auto c = with_dropout(test::llama_style());
  c.num_layers = 3;
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 12;
  c.moe.layer_freq_list = {1, 0, 1};
  c.moe.aux_loss_coeff = 1e-2, c.moe.z_loss_coeff = 1e-3;
  return c;
}

// Untied: a tied word table takes the output layer's gradient during each forward, so the two
// orders would add its parts in another order (not a difference the stash makes).
model::gpt_model_config mla_model() {
  auto c = with_dropout(test::gpt2_style());
  c.num_layers = 3, c.num_attention_heads = 4, c.qk_layernorm = true;
  c.untie_embeddings_and_output_weights = true;
  c.mla.enabled = true, c.mla.q_lora_rank = 12, c.mla.kv_lora_rank = 10;
  c.mla.qk_head_dim = 6, c.mla.qk_pos_emb_head_dim = 4, c.mla.v_head_dim = 5;
  c.mla.rotary_scaling_factor = 2, c.mla.mscale = 0.5, c.mla.mscale_all_dim = 0.8;
  return c;
}

model::gpt_model_config hybrid_model(const std::string& pattern) { return with_dropout(test::hybrid_style(pattern)); }

}  // namespace

TEST_CASE("a stashing MoE chunk (softmax top-2, aux and z losses, jitter, capacity, a shared expert) gives sequential order's numbers bit for bit", "[stash][moe]") {
  auto c = moe_model();
  c.moe.input_jitter_eps = 0.1, c.moe.expert_capacity_factor = 1.0;
  c.moe.shared_expert_intermediate_size = 8;
  check_stash(c, whole_and_middle);
}

TEST_CASE("a stashing MoE chunk (sigmoid scores, expert bias, seq and global aux losses, fp64 router, grouped GEMM) gives sequential order's numbers bit for bit", "[stash][moe]") {
  auto c = moe_model();
  c.moe.score_function = model::moe_score_function::sigmoid, c.moe.enable_expert_bias = true;
  c.moe.load_balancing_list = {{model::moe_load_balancing::seq_aux_loss, 1e-2},
                               {model::moe_load_balancing::global_aux_loss, 2e-2}};
  c.moe.router_dtype = tensor::dtype::float64, c.moe.grouped_gemm = true;
  check_stash(c, whole_and_middle);
}

TEST_CASE("a stashing MoE chunk (top-1 pre-softmax, probabilities on the input, drops by position) gives sequential order's numbers bit for bit", "[stash][moe]") {
  auto c = moe_model();
  c.moe.router_topk = 1, c.moe.router_pre_softmax = true, c.moe.apply_probs_on_input = true;
  c.moe.expert_capacity_factor = 1.0, c.moe.drop_by_position = true;
  check_stash(c, whole_and_middle);
}

TEST_CASE("a stashing MoE chunk under selective MoE recomputation gives sequential order's numbers bit for bit", "[stash][moe]") {
  auto c = moe_model();
  c.recompute.granularity = model::recompute_granularity::selective, c.recompute.moe = true;
  check_stash(c, whole_and_middle);
}

TEST_CASE("stashing MoE chunks with their experts over 2 expert-parallel ranks give sequential order's numbers bit for bit", "[stash][moe]") {
  auto c = moe_model();
  c.moe.shared_expert_intermediate_size = 8;
  check_stash(c, whole_and_middle, 2,
              [](model::gpt_model_config rc, int r) {
                rc.moe.expert_parallel_size = 2, rc.moe.expert_parallel_rank = r;
                return rc;
              },
              [](int, model::group& ep) {
                static thread_local model::single_group one;
                return rank_groups{&one, nullptr, {.expert_parallel = &ep}};
              });
}

TEST_CASE("a stashing MLA chunk gives sequential order's numbers bit for bit", "[stash][mla]") {
  check_stash(mla_model(), whole_and_middle);
}

TEST_CASE("a stashing MLA and MoE chunk with multi-token prediction gives sequential order's numbers bit for bit", "[stash][mla][moe][mtp]") {
  auto c = mla_model();
  c.untie_embeddings_and_output_weights = true, c.mtp_num_layers = 2, c.add_bias_linear = false;
  c.position_embedding_type = model::position_embedding_kind::rope;
  c.moe.num_experts = 4, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 12, c.moe.layer_freq_list = {0, 1, 1};
  c.moe.aux_loss_coeff = 1e-2;
  check_stash(c, {{0, 3, true, true}});
}

TEST_CASE("a stashing hybrid Mamba chunk gives sequential order's numbers bit for bit", "[stash][mamba]") {
  check_stash(hybrid_model("M*-"), whole_and_middle);
}

TEST_CASE("stashing chunks under context parallelism (p2p, a2a, a2a+p2p and allgather attention, MLA, Mamba) give sequential order's numbers bit for bit", "[stash][cp]") {
  const auto cp2 = [](model::cp_comm_kind kind) {
    return [kind](model::gpt_model_config rc, int r) {
      rc.context_parallel_size = 2, rc.context_parallel_rank = r, rc.cp_comm_types = {kind};
      return rc;
    };
  };
  const auto groups = [](int, model::group& cp) {
    static thread_local model::single_group one;
    return rank_groups{&one, &cp};
  };
  auto dense = with_dropout(test::llama_style());
  dense.num_layers = 3, dense.seq_length = 8, dense.max_position_embeddings = 8;
  for (auto kind : {model::cp_comm_kind::p2p, model::cp_comm_kind::a2a, model::cp_comm_kind::allgather}) {
    INFO("cp comm kind " << int(kind));
    check_stash(dense, whole_and_middle, 2, cp2(kind), groups, true);
  }
  // a2a+p2p with hierarchical sizes 2 1: the all-to-all over both ranks, a ring of one.
  const auto hierarchical_groups = [](int, model::group& cp) {
    static thread_local model::single_group one;
    cp.set_levels({&cp, &one});
    return rank_groups{&one, &cp};
  };
  check_stash(dense, whole_and_middle, 2, cp2(model::cp_comm_kind::a2a_p2p), hierarchical_groups, true);
  auto mla = mla_model();
  mla.seq_length = 8, mla.max_position_embeddings = 8;
  check_stash(mla, whole_and_middle, 2, cp2(model::cp_comm_kind::allgather), groups, true);
  check_stash(hybrid_model("M*-"), whole_and_middle, 2, cp2(model::cp_comm_kind::p2p), groups, true);
}

TEST_CASE("stashing fp8 chunks (MLA with MoE and MTP, Mamba) give sequential order's numbers bit for bit under every recipe", "[stash][fp8]") {
  // The delayed recipe's scales are the same in both orders: each forward's come from the
  // forwards before it, each backward's from the backwards before it.
  auto deepseek = test::llama_style();
  deepseek.num_layers = 3, deepseek.hidden_size = 32, deepseek.ffn_hidden_size = 48;
  deepseek.num_attention_heads = 4, deepseek.num_query_groups = 4;
  deepseek.seq_length = 16, deepseek.max_position_embeddings = 16, deepseek.padded_vocab_size = 64;
  deepseek.init_method_std = 0.05f, deepseek.qk_layernorm = true, deepseek.params_dtype = tensor::dtype::float32;
  deepseek.mla.enabled = true, deepseek.mla.q_lora_rank = 12, deepseek.mla.kv_lora_rank = 10;
  deepseek.mla.qk_head_dim = 6, deepseek.mla.qk_pos_emb_head_dim = 4, deepseek.mla.v_head_dim = 5;
  deepseek.moe.num_experts = 4, deepseek.moe.router_topk = 2, deepseek.moe.ffn_hidden_size = 16;
  deepseek.moe.layer_freq_list = {0, 1, 1}, deepseek.moe.aux_loss_coeff = 1e-2;
  deepseek.mtp_num_layers = 1;
  auto mamba = hybrid_model("M*M");
  mamba.hidden_size = 32, mamba.ffn_hidden_size = 64, mamba.seq_length = 16, mamba.max_position_embeddings = 16;
  mamba.padded_vocab_size = 64, mamba.mamba.head_dim = 4;  // in_proj's width 160: a multiple of 16
  using R = model::fp8_recipe;
  for (auto recipe : {R::delayed, R::tensorwise, R::mxfp8, R::blockwise}) {
    INFO("recipe " << int(recipe));
    for (auto c : {deepseek, mamba}) {
      c.fp8.enabled = true, c.fp8.recipe = recipe, c.fp8.fp8 = model::fp8_format::hybrid;
      c.fp8.fp8_amax_history_len = 4, c.fp8.amax_compute_algo = model::fp8_amax_compute_algo::max;
      check_stash(c, {{0, 3, true, true}});
    }
  }
}
