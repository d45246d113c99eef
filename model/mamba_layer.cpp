// Mamba layer: the fused pre-norm, the Mamba-2 mixer and the bias-dropout-add residual.
#include "model/mamba_layer.hpp"

#include <string>

#include "kernels/dropout.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/fp8_linear.hpp"

namespace mactor::model {
namespace {
// The layer's one dropout site, mixed into the mask stream (a transformer layer's attention
// residual has the same site; layer numbers keep the streams apart).
constexpr std::uint64_t mixer_residual_site = 1;

std::string mixer_name(int number) { return "decoder.layers." + std::to_string(number) + ".mixer"; }
}  // namespace

mamba_mixer_config mamba_mixer_config_of(const gpt_model_config& c, int layer) {
  mamba_mixer_config m;
  m.hidden_size = c.hidden_size;
  m.state_dim = c.mamba.state_dim;
  m.head_dim = c.mamba.head_dim;
  m.num_groups = c.mamba.num_groups;
  m.num_heads = c.mamba.num_heads;
  m.init_method_std = c.init_method_std;
  m.num_layers = c.num_layers;
  m.sequence_parallel = c.sequence_parallel;
  m.fp8 = with_layer_fp8(c, layer).fp8;
  return m;  // d_conv 4, expand 2, chunk 128, the gated norm's eps 1e-5: fixed in Megatron's mixer
}

mamba_layer::mamba_layer(parameter_store& store, int number, const gpt_model_config& c, int tp_size, group* cp)
    : number_(number), hidden_(c.hidden_size), sequence_parallel_(c.sequence_parallel && tp_size > 1),
      seed_(c.seed), type_(c.params_dtype), shard_(c.shard()),
      hidden_dropout_(c.hidden_dropout),
      norm_(norm::fused_into(store, mixer_name(number) + ".in_proj", c)),
      mixer_(store, mixer_name(number), mamba_mixer_config_of(c, number), tp_size, cp, c.shard()) {}

void mamba_layer::forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
                          tensor::tensor_view y, int seq, int batch, bool training,
                          std::uint64_t step) {
  // With sequence parallelism x, y, the norm and the residual hold this rank's rows / tp.
  rows_ = sequence_parallel_ ? seq * batch / tp.size() : seq * batch;
  placement_ = row_placement(shard_, batch, sequence_parallel_ ? std::int64_t(rows_) * tp.rank() : 0, rows_);
  hidden_p_ = training ? hidden_dropout_ : 0.0f;
  stream_ = kernels::dropout_stream(seed_, number_, mixer_residual_site, step);
  auto normed = ensure_activation(normed_, rows_, hidden_, type_);
  auto branch = ensure_activation(branch_, rows_, hidden_, type_);
  norm_.forward(store, x, normed, rows_);
  mixer_.forward(store, tp, normed, branch, seq, batch);
  placement_.bias_dropout_add(y, x, branch, {}, hidden_, hidden_p_, stream_);
}

void mamba_layer::backward(parameter_store& store, group& tp, tensor::const_tensor_view x,
                           tensor::const_tensor_view dy, tensor::tensor_view dx) {
  const std::int64_t n = std::int64_t(rows_) * hidden_;
  auto branch = ensure_activation(branch_, rows_, hidden_, type_);
  auto dnormed = ensure_activation(dnormed_, rows_, hidden_, type_);
  placement_.dropout_apply(branch, elements(dy, 0, n), hidden_, hidden_p_, stream_);
  mixer_.backward(store, tp, branch, normed_, dnormed);
  if (dx.data != dy.data) kernels::copy(elements(dx, 0, n), elements(dy, 0, n));
  norm_.backward(store, dnormed, x, dx, rows_, true);
}

void mamba_layer::release() {
  for (auto* t : {&normed_, &branch_, &dnormed_}) *t = tensor::tensor();
  norm_.release();
  mixer_.release();
}

}  // namespace mactor::model
