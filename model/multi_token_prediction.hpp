// Megatron-Core's multi-token prediction (MultiTokenPredictionBlock, DeepSeek-V3's MTP) on the
// last pipeline stage. Depth k (0-based) predicts the token k + 2 places ahead: its ids are the
// previous depth's rolled one place further left (the vacated last position gets id 0, as
// Megatron's roll_tensor fills it), embedded with the model's shared word table; then
//   h_k = final_layernorm_k(layer_k(eh_proj_k([enorm_k(embedding), hnorm_k(h_{k-1})])))
// with h_{-1} the decoder's output after its final norm, and the shared output layer's
// cross-entropy on the labels (and loss mask) rolled k + 1 places. eh_proj is column-parallel
// (2h -> h) and its output is all-gathered over the tensor-parallel group (Megatron's
// gather_from_tensor_model_parallel_region; scattered to the sequence shard under sequence
// parallelism). Each depth's loss enters the backward as Megatron's MTPLossAutoScaler makes it:
// mtp_loss_scaling_factor / depths * scale * sum(mask * loss) / sum(mask), scale being the
// main loss's backward scale (loss scale / micro-batches); the decoder output receives the
// resulting gradient on top of the LM loss's.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/language_model_embedding.hpp"
#include "model/norm.hpp"
#include "model/output_layer_loss.hpp"
#include "model/parameter.hpp"
#include "model/tensor_parallel_linear.hpp"
#include "model/transformer_layer.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {

/// One depth's loss over this rank's rows: sum of loss * rolled mask and the rolled mask's sum.
struct mtp_depth_loss {
  double loss_sum = 0;
  double num_tokens = 0;
};

class multi_token_prediction {
 public:
  /// Registers mtp.layers.<k>.{enorm, hnorm, eh_proj, transformer_layer, final_layernorm} for
  /// k < config.mtp_num_layers; word: the word-embedding table's id on this chunk. Each depth's
  /// transformer layer has the spec of the decoder's last layer (dense or MoE), as Megatron's
  /// pretrain_gpt builds it. cp: the context-parallel group (needed when
  /// config.context_parallel_size > 1): the ids, labels and masks roll over the whole sequence,
  /// as Megatron's roll_tensor passes the boundary values between the context-parallel ranks.
  multi_token_prediction(parameter_store& store, const gpt_model_config& config, int tp_rank,
                         int tp_size, int word, moe_groups moe = {}, group* cp = nullptr);
  int depths() const { return int(depths_.size()); }
  std::vector<transformer_layer*> layers();
  std::vector<const transformer_layer*> layers() const;

  /// Every depth's forward from h0 (the decoder's output after its final norm, this rank's
  /// [local rows, hidden]); ids [seq * batch] in [seq, batch] order (all rows). Keeps what the
  /// backward needs.
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view h0,
               const std::vector<std::int32_t>& ids, int seq, int batch, bool training,
               std::uint64_t step);
  /// Each depth's loss through the shared output layer for labels and mask [seq * batch] (the
  /// LM loss's, rolled here). With grads non-null, grads[k] receives the gradient of depth k's
  /// output (scaled as above by `scale`) and the output layer's weight gradient accumulates.
  std::vector<mtp_depth_loss> losses(parameter_store& store, group& tp, output_layer_loss& output,
                                     const std::vector<std::int32_t>& labels,
                                     const std::vector<float>& mask, double scale, bool per_token,
                                     std::vector<tensor::tensor>* grads);
  /// Backward through every depth from the kept output gradients; dh0 += the gradient reaching
  /// the decoder's output. Accumulates the weight gradients (and the shared embedding's).
  void backward(parameter_store& store, group& tp, const std::vector<tensor::tensor>& grads,
                tensor::const_tensor_view h0, tensor::tensor_view dh0);
  /// Every depth's embedding keeps the word table's gradient in the backward (the table is the
  /// chunk's tied output-layer weight; language_model_embedding::keep_word_grads_in_backward).
  void keep_embedding_grads_in_backward() {
    for (auto& d : depths_) d.embedding.keep_word_grads_in_backward();
  }
  /// Frees the kept activations.
  void release();
  /// What every depth's backward reads from the last forward, into the stash or back out
  /// (activation_stash.hpp). The rolled ids move with their buffer, which the embedding points into.
  void carry(activation_stash& s);

 private:
  struct depth {
    depth(parameter_store& store, int k, const gpt_model_config& c, int tp_rank, int tp_size,
          int word, moe_groups moe, group* cp);
    language_model_embedding embedding;
    norm enorm, hnorm;
    column_parallel_linear eh_proj;
    transformer_layer layer;
    norm final_layernorm;
    std::vector<std::int32_t> ids;  // this depth's rolled ids (the embedding's backward reads them)
    tensor::index_array device_ids;  // on a device: the copy of ids its kernels read
    tensor::tensor emb, cat, proj, x, y, out;
  };
  void project_forward(const parameter_store& store, group& tp, depth& d);
  void project_backward(parameter_store& store, group& tp, depth& d, tensor::const_tensor_view dx);

  /// values rolled `times` places left over the whole sequence (the rank's own rows under
  /// context parallelism: gathered, rolled, taken back).
  template <typename T>
  std::vector<T> rolled_over_sequence(const std::vector<T>& values, int times) const;

  gpt_model_config config_;
  group* cp_;
  int seq_ = 0, batch_ = 0, rows_ = 0, local_rows_ = 0;
  std::vector<depth> depths_;
  tensor::tensor carry_, dy_, dx_, dproj_, dcat_, dnorm_, demb_, gathered_;
};

}  // namespace mactor::model
