// Transformer layer: norms, attention, MLP and the two bias-dropout-add residuals.
#include "model/transformer_layer.hpp"

#include <algorithm>

#include "kernels/dropout.hpp"

namespace mactor::model {
namespace {
// Dropout sites of a layer, mixed into the mask stream.
constexpr std::uint64_t attention_probs_site = 0;
constexpr std::uint64_t attention_residual_site = 1;
constexpr std::uint64_t mlp_residual_site = 2;

std::string layer_name(int number) { return "decoder.layers." + std::to_string(number); }
}  // namespace

template <typename T>
transformer_layer<T>::transformer_layer(parameter_store<T>& store, int number,
                                        const gpt_model_config& c, int tp_rank, int tp_size)
    : number_(number), hidden_(c.hidden_size), sequence_parallel_(c.sequence_parallel),
      seed_(c.seed),
      attention_dropout_(c.attention_dropout), hidden_dropout_(c.hidden_dropout),
      input_layernorm_(store, layer_name(number) + ".input_layernorm", c),
      self_attention_(store, layer_name(number) + ".self_attention", c, tp_rank, tp_size),
      pre_mlp_layernorm_(store, layer_name(number) + ".pre_mlp_layernorm", c),
      mlp_(store, layer_name(number) + ".mlp", c, tp_size) {}

template <typename T>
void transformer_layer<T>::forward(const parameter_store<T>& store, group& tp, const T* x, T* y,
                                   int seq, int batch, bool training, std::uint64_t step) {
  rows_ = seq * batch;
  local_rows_ = sequence_parallel_ ? rows_ / tp.size() : rows_;
  const std::size_t n = std::size_t(local_rows_) * hidden_;
  first_index_ = sequence_parallel_ ? n * std::size_t(tp.rank()) : 0;
  ln1_.resize(n), x1_.resize(n), ln2_.resize(n), branch_.resize(n);
  hidden_p_ = training ? hidden_dropout_ : 0.0f;
  const std::uint64_t probs_stream =
      kernels::dropout_stream(seed_, number_, attention_probs_site, step);
  attention_stream_ = kernels::dropout_stream(seed_, number_, attention_residual_site, step);
  mlp_stream_ = kernels::dropout_stream(seed_, number_, mlp_residual_site, step);

  input_layernorm_.forward(store, x, ln1_.data(), local_rows_);
  self_attention_.forward(store, tp, ln1_.data(), branch_.data(), seq, batch,
                          training ? attention_dropout_ : 0.0f, probs_stream);
  kernels::bias_dropout_add<T>(x1_.data(), x, branch_.data(), self_attention_.proj_bias(store),
                               local_rows_, hidden_, hidden_p_, attention_stream_, first_index_);
  pre_mlp_layernorm_.forward(store, x1_.data(), ln2_.data(), local_rows_);
  mlp_.forward(store, tp, ln2_.data(), branch_.data(), rows_);
  kernels::bias_dropout_add<T>(y, x1_.data(), branch_.data(), mlp_.fc2_bias(store), local_rows_,
                               hidden_, hidden_p_, mlp_stream_, first_index_);
}

template <typename T>
void transformer_layer<T>::backward(parameter_store<T>& store, group& tp, const T* x, const T* dy,
                                    T* dx) {
  const std::size_t n = std::size_t(local_rows_) * hidden_;
  dx1_.resize(n), dln_.resize(n);
  // Through the MLP residual: dx1 = dy + norm2'(mlp'(dropout(dy))).
  kernels::dropout_apply<T>(branch_.data(), dy, n, hidden_p_, mlp_stream_, first_index_);
  mlp_.backward(store, tp, branch_.data(), ln2_.data(), dln_.data());
  std::copy_n(dy, n, dx1_.data());
  pre_mlp_layernorm_.backward(store, dln_.data(), x1_.data(), dx1_.data(), local_rows_, true);
  // Through the attention residual: dx = dx1 + norm1'(attention'(dropout(dx1))).
  kernels::dropout_apply<T>(branch_.data(), dx1_.data(), n, hidden_p_, attention_stream_,
                            first_index_);
  self_attention_.backward(store, tp, branch_.data(), ln1_.data(), dln_.data());
  std::copy_n(dx1_.data(), n, dx);
  input_layernorm_.backward(store, dln_.data(), x, dx, local_rows_, true);
}

template class transformer_layer<float>;
template class transformer_layer<double>;

}  // namespace mactor::model
