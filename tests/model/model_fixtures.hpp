// Small model configurations and batches shared by the model tests: a Llama-style model
// (RMSNorm, RoPE, SwiGLU, GQA, untied, no biases) and a GPT-2-style one (LayerNorm, learned
// positions, GeLU, biases, tied embeddings).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/convert.hpp"
#include "model/gpt_model.hpp"
#include "tensor/tensor.hpp"

namespace mactor::test {

/// c with float64 parameters and activations (the gradient checks' precision).
inline model::gpt_model_config in_double(model::gpt_model_config c) {
  c.params_dtype = tensor::dtype::float64;
  return c;
}

/// A tensor's elements copied out as T (throws tensor_error unless T is its dtype).
template <class T>
std::vector<T> copy_of(tensor::const_tensor_view v) {
  auto e = v.host<T>();
  return {e.begin(), e.end()};
}

/// A tensor's elements as floats, whatever its dtype (16-bit ones widened exactly).
inline std::vector<float> floats_of(tensor::const_tensor_view v) {
  std::vector<float> out(std::size_t(v.numel()));
  kernels::convert(tensor::view_of(std::span<float>(out)), v);
  return out;
}

/// A vector's elements as a tensor view (activations handed between chunks in a test).
template <class T>
tensor::tensor_view view(std::vector<T>& v) {
  return tensor::view_of(std::span<T>(v));
}

inline model::gpt_model_config llama_style() {
  model::gpt_model_config c;
  c.num_layers = 2, c.hidden_size = 16, c.ffn_hidden_size = 24;
  c.num_attention_heads = 4, c.num_query_groups = 2, c.kv_channels = 8;
  c.seq_length = 5, c.max_position_embeddings = 5, c.padded_vocab_size = 24;
  c.normalization = model::normalization_kind::rms_norm;
  c.position_embedding_type = model::position_embedding_kind::rope;
  c.rotary_base = 1000.0, c.rotary_percent = 0.5f;
  c.swiglu = true, c.add_bias_linear = false, c.untie_embeddings_and_output_weights = true;
  c.attention_dropout = 0.0f, c.hidden_dropout = 0.0f;
  c.init_method_std = 0.2f, c.seed = 7;
  return c;
}

/// A small hybrid Mamba model (pretrain_mamba's layers: 'M' Mamba, '*' attention, '-' MLP) on
/// llama_style's sizes, without positions.
inline model::gpt_model_config hybrid_style(const std::string& pattern) {
  auto c = llama_style();
  c.swiglu = false, c.squared_relu = true;
  c.num_layers = int(pattern.size());
  c.hybrid_layers = pattern, c.is_hybrid_model = true;
  c.seq_length = 8, c.max_position_embeddings = 8;
  c.position_embedding_type = model::position_embedding_kind::none;
  c.padded_vocab_size = 40, c.init_method_std = 0.1f;
  c.mamba.state_dim = 4, c.mamba.head_dim = 8, c.mamba.num_groups = 2;
  return c;
}

inline model::gpt_model_config gpt2_style() {
  model::gpt_model_config c;
  c.num_layers = 2, c.hidden_size = 16, c.ffn_hidden_size = 32;
  c.num_attention_heads = 4, c.seq_length = 5, c.max_position_embeddings = 8;
  c.padded_vocab_size = 24;
  c.normalization = model::normalization_kind::layer_norm;
  c.position_embedding_type = model::position_embedding_kind::learned_absolute;
  c.add_bias_linear = true, c.untie_embeddings_and_output_weights = false;
  c.attention_dropout = 0.0f, c.hidden_dropout = 0.0f;
  c.init_method_std = 0.2f, c.seed = 11;
  return c;
}

/// tokens, labels (tokens shifted by one), a loss mask with a few zeros, [batch, seq].
struct batch_data {
  std::vector<std::int32_t> tokens, labels;
  std::vector<float> loss_mask;
  int micro_batch_size;
  model::micro_batch view() const {
    return {tokens.data(), labels.data(), loss_mask.data(), nullptr, micro_batch_size};
  }
};

inline batch_data make_batch(int micro_batch_size, int seq, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  batch_data b;
  b.micro_batch_size = micro_batch_size;
  std::vector<std::int32_t> text(std::size_t(micro_batch_size) * (seq + 1));
  for (auto& t : text) t = token(rng);
  for (int i = 0; i < micro_batch_size; ++i)
    for (int s = 0; s < seq; ++s) {
      b.tokens.push_back(text[i * (seq + 1) + s]);
      b.labels.push_back(text[i * (seq + 1) + s + 1]);
      b.loss_mask.push_back((i + s) % 4 == 3 ? 0.0f : 1.0f);
    }
  return b;
}

/// Per-token losses of `steps` plain SGD steps (lr on the per-token gradient) of an fp32 model on
/// one batch of 4 sequences: how the fp8 tests see a model train.
inline std::vector<double> sgd_losses(const model::gpt_model_config& c, int steps, float lr = 0.1f) {
  model::single_group tp;
  model::gpt_model m(c, tp);
  const auto batch = make_batch(4, c.seq_length, c.padded_vocab_size, 9);
  double tokens = 0;
  for (float v : batch.loss_mask) tokens += v;
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    m.zero_grad();
    const auto r = m.forward_backward(batch.view(), 1.0 / tokens);
    losses.push_back(r.loss_sum / r.num_tokens);
    for (auto& p : m.parameters()) {
      auto v = p.value.host<float>();
      auto g = p.grad.host<float>();
      for (std::size_t i = 0; i < v.size(); ++i) v[i] -= lr * g[i];
    }
  }
  return losses;
}

}  // namespace mactor::test
