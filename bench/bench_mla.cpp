// Multi-latent attention against standard multi-head attention at equal hidden size and heads,
// on the CPU: one forward and one backward of the attention block (projections, RoPE, core
// attention), milliseconds, median of the repeats, fp32, sequence lengths 256..1024. MLA's widths
// follow DeepSeek-V2-Lite's ratios (kv latent hidden/4, head dims 64 + 32 rotary, values 64), with
// and without a query latent. Prints a table and MLA's time over MHA's from the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/group.hpp"
#include "model/multi_latent_attention.hpp"
#include "model/self_attention.hpp"
#include "bench/random_values.hpp"

using namespace mactor;
using bench::randn;

namespace {

constexpr int hidden = 512, heads = 8, repeats = 5;

model::gpt_model_config base(int seq) {
  model::gpt_model_config c;
  c.num_layers = 1, c.hidden_size = hidden, c.num_attention_heads = heads, c.num_query_groups = heads;
  c.ffn_hidden_size = 4 * hidden, c.seq_length = seq, c.max_position_embeddings = seq, c.add_bias_linear = false;
  c.position_embedding_type = model::position_embedding_kind::rope;
  c.init_method_std = 0.02f;
  return c;
}

model::gpt_model_config mla(int seq, int q_lora_rank) {
  auto c = base(seq);
  c.mla.enabled = true, c.mla.q_lora_rank = q_lora_rank, c.mla.kv_lora_rank = hidden / 4;
  c.mla.qk_head_dim = 64, c.mla.qk_pos_emb_head_dim = 32, c.mla.v_head_dim = 64, c.mla.yarn = false;
  return c;
}

struct times {
  double forward = 0, backward = 0;
};

// Forward then backward, `repeats` times after a warm-up; the medians.
template <class Attention>
times time_attention(const model::gpt_model_config& c, int seq) {
  model::parameter_store store;
  Attention attention(store, "decoder.layers.0.self_attention", c, 0, 0, 1);
  store.allocate(c.seed, 0, 1);
  model::single_group tp;
  auto x = randn(std::size_t(seq) * hidden, 1), dy = randn(std::size_t(seq) * hidden, 2), out = x, dx = x;
  const auto v = [](std::vector<float>& a) { return tensor::view_of(std::span<float>(a)); };
  std::vector<double> f, b;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    attention.forward(store, tp, v(x), v(out), seq, 1, 0.0f, 0);
    const auto t1 = std::chrono::steady_clock::now();
    attention.backward(store, tp, v(dy), v(x), v(dx));
    const auto t2 = std::chrono::steady_clock::now();
    if (r == 0) continue;  // warm-up
    f.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    b.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::sort(f.begin(), f.end()), std::sort(b.begin(), b.end());
  return {f[f.size() / 2], b[b.size() / 2]};
}

void row(int seq, const char* name, times t, double mha_step) {
  const double step = t.forward + t.backward;
  std::printf("| %5d | %-28s | %8.2f | %8.2f | %8.2f | %6.2f |\n", seq, name, t.forward, t.backward, step, step / mha_step);
}

}  // namespace

int main() {
  std::printf("Attention block, hidden %d, %d heads, batch 1, fp32 (median of %d): MHA (head dim %d) vs MLA "
              "(kv latent %d, qk %d + rope %d, v %d)\n\n",
              hidden, heads, repeats, hidden / heads, hidden / 4, 64, 32, 64);
  std::printf("| %5s | %-28s | %8s | %8s | %8s | %6s |\n", "seq", "attention", "fwd ms", "bwd ms", "step ms", "/ MHA");
  std::printf("|-------|------------------------------|----------|----------|----------|--------|\n");
  for (int seq : {256, 512, 1024}) {
    const times mha = time_attention<model::self_attention>(base(seq), seq);
    const double mha_step = mha.forward + mha.backward;
    row(seq, "MHA", mha, mha_step);
    row(seq, "MLA, no query latent", time_attention<model::multi_latent_attention>(mla(seq, 0), seq), mha_step);
    row(seq, "MLA, query latent 192", time_attention<model::multi_latent_attention>(mla(seq, 192), seq), mha_step);
  }
  return 0;
}
