// Sequence parallelism (Megatron's --sequence-parallel) against plain tensor parallelism and tp = 1:
// ranks are threads of one process; the model is one chunk or two pipeline chunks with every
// micro-batch in flight (so the first chunk recomputes). Dropout is on everywhere: a shard must
// draw the mask elements the unsplit tensor draws.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "model/gpt_chunk.hpp"
#include "model/local_group.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/model/model_fixtures.hpp"

using namespace mactor;

namespace {

struct run_result {
  double loss = 0, tokens = 0;
  std::map<std::string, std::vector<float>> grads;  // tp = 1 layout, tied copies summed
  std::size_t activation_numel = 0;
};

constexpr int micro_batches = 3, micro_batch_size = 2;

// One tp rank: chunks[0..stages) over the model's layers; every forward first, then backwards.
model::loss_and_count drive(std::vector<model::gpt_chunk>& chunks,
                            const std::vector<test::batch_data>& batches) {
  model::loss_and_count total;
  const std::size_t n = chunks.front().activation_numel(micro_batch_size);
  // acts[mb][s]: the output of stage s (the input of s + 1).
  std::vector<std::vector<std::vector<float>>> acts(micro_batches,
                                                    std::vector<std::vector<float>>(chunks.size(), std::vector<float>(n)));
  for (int i = 0; i < micro_batches; ++i)
    for (std::size_t s = 0; s < chunks.size(); ++s) {
      const auto in = s == 0 ? tensor::tensor_view{} : test::view(acts[i][s - 1]);
      const auto r = chunks[s].forward(i, batches[i].view(), in, test::view(acts[i][s]), true, true, 0.05f, 100 + i);
      total.loss_sum += r.loss_sum, total.num_tokens += r.num_tokens;
    }
  std::vector<float> g_out(n), g_in(n);
  for (int i = 0; i < micro_batches; ++i)
    for (std::size_t s = chunks.size(); s-- > 0;) {
      chunks[s].backward(i, s + 1 == chunks.size() ? tensor::tensor_view{} : test::view(g_out), s == 0 ? tensor::tensor_view{} : test::view(g_in));
      std::swap(g_out, g_in);
    }
  for (auto& c : chunks) c.all_reduce_sequence_parallel_grads();
  return total;
}

run_result run(model::gpt_model_config c, int tp_size, bool sequence_parallel, int stages) {
  std::vector<test::batch_data> batches;
  for (int i = 0; i < micro_batches; ++i)
    batches.push_back(test::make_batch(micro_batch_size, c.seq_length, c.padded_vocab_size, 31 + i));
  auto groups = model::make_local_groups(tp_size);
  std::vector<std::vector<model::gpt_chunk>> ranks(tp_size);
  std::vector<model::loss_and_count> losses(tp_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp_size; ++r)
    threads.emplace_back([&, r] {
      auto rc = c;
      rc.tensor_model_parallel_size = tp_size, rc.tensor_model_parallel_rank = r;
      rc.sequence_parallel = sequence_parallel;
      const int per = c.num_layers / stages;
      ranks[r].reserve(stages);
      for (int s = 0; s < stages; ++s)
        ranks[r].emplace_back(rc, *groups[r], model::chunk_layout{s * per, (s + 1) * per, s == 0, s == stages - 1});
      losses[r] = drive(ranks[r], batches);
    });
  for (auto& t : threads) t.join();
  run_result result;
  for (int r = 1; r < tp_size; ++r) CHECK(losses[r].loss_sum == losses[0].loss_sum);
  result.loss = losses[0].loss_sum, result.tokens = losses[0].num_tokens;
  result.activation_numel = ranks[0].front().activation_numel(micro_batch_size);
  for (std::size_t s = 0; s < ranks[0].size(); ++s)
    for (std::size_t i = 0; i < ranks[0][s].parameters().size(); ++i) {
      const auto& p0 = ranks[0][s].parameters()[i];
      std::size_t numel = 1;
      for (auto d : p0.full_shape) numel *= std::size_t(d);
      std::vector<float> full(numel);
      for (int r = 0; r < tp_size; ++r) {
        const auto& p = ranks[r][s].parameters()[i];
        if (p.split == model::tp_split::replicated && r > 0) {
          INFO(p.name << " differs between tp ranks 0 and " << r);
          CHECK(test::copy_of<float>(p.grad) == test::copy_of<float>(p0.grad));
        }
        model::place_shard(p.grad_as<float>(), full.data(), p.full_shape, p.split, r, tp_size);
      }
      auto& sum = result.grads[p0.name];
      if (sum.empty()) sum.assign(numel, 0.0f);
      for (std::size_t k = 0; k < numel; ++k) sum[k] += full[k];  // the tied embedding's two copies add up
    }
  return result;
}

void check_same(const run_result& got, const run_result& want, const char* what) {
  CHECK(got.tokens == want.tokens);
  CHECK(got.loss == Approx(want.loss).epsilon(1e-5));
  REQUIRE(got.grads.size() == want.grads.size());
  double worst = 0;
  for (const auto& [name, g] : want.grads) {
    INFO(name);
    REQUIRE(got.grads.count(name));
    const double e = test::relative_error(got.grads.at(name), g);
    CHECK(e < 1e-5);
    worst = std::max(worst, e);
  }
  std::printf("%s: loss relative difference %.3g, worst parameter-gradient relative error %.3g\n", what,
              std::abs(got.loss - want.loss) / std::abs(want.loss), worst);
}

void check_sequence_parallel(model::gpt_model_config c) {
  c.seq_length = 8, c.max_position_embeddings = 8, c.num_layers = 2;
  c.attention_dropout = 0.1f, c.hidden_dropout = 0.1f;
  const auto alone = run(c, 1, false, 1);
  REQUIRE(alone.loss > 0);
  for (int tp : {2, 4}) {
    for (int stages : {1, 2}) {
      INFO("tp=" << tp << " pipeline stages=" << stages);
      const auto plain = run(c, tp, false, stages);
      const auto sp = run(c, tp, true, stages);
      CHECK(plain.activation_numel == std::size_t(c.seq_length) * micro_batch_size * c.hidden_size);
      CHECK(sp.activation_numel == plain.activation_numel / tp);
      const std::string layout = "tp=" + std::to_string(tp) + " stages=" + std::to_string(stages);
      check_same(plain, alone, (layout + " plain tp vs tp=1").c_str());
      check_same(sp, alone, (layout + " sequence parallel vs tp=1").c_str());
      check_same(sp, plain, (layout + " sequence parallel vs plain tp").c_str());
    }
  }
}

}  // namespace

TEST_CASE("sequence parallelism at tp=2 and tp=4 gives the loss and gradients of tp=1 and of plain tp (gpt2 style, dropout)") {
  auto c = test::gpt2_style();
  c.padded_vocab_size = 32;
  check_sequence_parallel(c);
}

TEST_CASE("sequence parallelism at tp=2 and tp=4 gives the loss and gradients of tp=1 and of plain tp (llama style, dropout)") {
  auto c = test::llama_style();
  c.num_attention_heads = 8, c.num_query_groups = 4, c.padded_vocab_size = 32;
  check_sequence_parallel(c);
}

TEST_CASE("the query/key L2 norm (--qk-l2-norm) at tp=2 and tp=4, with and without sequence parallelism, gives the loss and gradients of tp=1 (grouped queries)") {
  auto c = test::llama_style();
  c.num_attention_heads = 8, c.num_query_groups = 4, c.padded_vocab_size = 32, c.qk_l2_norm = true;
  check_sequence_parallel(c);
}

TEST_CASE("multi-latent attention at tp=2 and tp=4, with and without sequence parallelism, gives the loss and gradients of tp=1", "[mla]") {
  // Replicated latent projections and norms must end with the same gradient on every tp rank
  // (checked in run()) and the shared RoPE key's gradient summed over the ranks' heads.
  auto c = test::gpt2_style();
  c.num_attention_heads = 8, c.padded_vocab_size = 32, c.qk_layernorm = true;
  c.mla.enabled = true, c.mla.q_lora_rank = 12, c.mla.kv_lora_rank = 10;
  c.mla.qk_head_dim = 6, c.mla.qk_pos_emb_head_dim = 4, c.mla.v_head_dim = 5;
  c.mla.rotary_scaling_factor = 2, c.mla.mscale = 0.5, c.mla.mscale_all_dim = 0.8;
  check_sequence_parallel(c);
}

TEST_CASE("multi-token prediction at tp=2 and tp=4 with and without sequence parallelism and on a second pipeline stage gives the loss and gradients of tp=1", "[mtp]") {
  // Two depths on the last stage: eh_proj column-parallel and gathered, the depths' embedding
  // lookups vocab-parallel, the tied word table's copy on the last stage summed with the first's.
  auto c = test::llama_style();
  c.num_attention_heads = 8, c.num_query_groups = 4, c.padded_vocab_size = 32;
  c.untie_embeddings_and_output_weights = false, c.mtp_num_layers = 2;
  check_sequence_parallel(c);
}

TEST_CASE("sequence parallelism without the norm-gradient all-reduce leaves each rank a partial sum") {
  // The finalize step is what makes the norms right: before it, the tp ranks' gradients differ
  // and add up to the tp=1 gradient.
  auto c = test::gpt2_style();
  c.seq_length = 8, c.max_position_embeddings = 8, c.padded_vocab_size = 32;
  const auto batch = test::make_batch(2, c.seq_length, c.padded_vocab_size, 5);
  model::single_group one;
  model::gpt_chunk whole(c, one, {0, c.num_layers, true, true});
  whole.forward(0, batch.view(), {}, {}, true, true, 0.1f, 9);
  whole.backward(0, {}, {});
  auto groups = model::make_local_groups(2);
  std::vector<std::vector<float>> partial(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto rc = c;
      rc.tensor_model_parallel_size = 2, rc.tensor_model_parallel_rank = r, rc.sequence_parallel = true;
      model::gpt_chunk chunk(rc, *groups[r], {0, c.num_layers, true, true});
      chunk.forward(0, batch.view(), {}, {}, true, true, 0.1f, 9);
      chunk.backward(0, {}, {});
      for (auto& p : chunk.parameters())
        if (p.name == "decoder.final_layernorm.weight") partial[r] = test::copy_of<float>(p.grad);
    });
  for (auto& t : threads) t.join();
  const auto& ref = whole.parameters();
  const auto it = std::find_if(ref.begin(), ref.end(), [](const auto& p) { return p.name == "decoder.final_layernorm.weight"; });
  REQUIRE(it != ref.end());
  const std::vector<float> want = test::copy_of<float>(it->grad);
  std::vector<float> sum(want.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = partial[0][i] + partial[1][i];
  CHECK(test::relative_error(partial[0], want) > 1e-2);
  CHECK(test::relative_error(sum, want) < 1e-5);
}

TEST_CASE("sequence parallelism refuses tp=1 and a sequence length that does not split over the tp ranks") {
  auto c = test::gpt2_style();
  c.sequence_parallel = true;
  model::single_group one;
  CHECK_THROWS_WITH((model::gpt_chunk(c, one, {0, c.num_layers, true, true})),
                    Catch::Contains("sequence_parallel needs tensor_model_parallel_size > 1"));
  auto groups = model::make_local_groups(2);
  c.tensor_model_parallel_size = 2;  // seq_length 5
  CHECK_THROWS_WITH((model::gpt_chunk(c, *groups[0], {0, c.num_layers, true, true})),
                    Catch::Contains("seq_length=5 is not divisible by tensor_model_parallel_size=2"));
}
