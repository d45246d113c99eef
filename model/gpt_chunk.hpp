// One pipeline stage's share of Megatron-Core's GPTModel (or MambaModel, when the config holds a
// hybrid allocation: its layers are decoder_layers and its final norm decoder.final_norm): a
// contiguous run of layers,
// with the embedding when it is the first stage and the final norm, output layer and loss when it
// is the last. Several micro-batches can be in flight: each forward keeps its input under a slot.
// The layers hold one micro-batch's activations; before another micro-batch's forward or backward
// they move into the slot's activation_stash and come back for its backward, so every in-flight
// micro-batch keeps its activations as in Megatron (every layer kind stashes: dense, MoE, MLA,
// Mamba, MTP, context-parallel attention, fp8, whose forward scales wait in each fp8_linear).
// config.recompute adds Megatron's own recomputation (model/recompute.hpp) inside a micro-batch.
// With sequence parallelism (config.sequence_parallel) the activations between layers, and
// those passed between stages, are this rank's [seq / tp, batch, hidden] shard. Under context
// parallelism (config.context_parallel_size > 1) every activation holds only this rank's
// positions of the sequence (model/context_parallel.hpp), and the micro-batch's arrays are
// sliced to them as Megatron's get_batch_on_this_cp_rank does.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "model/activation_stash.hpp"

#include "model/decoder_layer.hpp"
#include "model/fp8_amax_reduction.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/language_model_embedding.hpp"
#include "model/multi_token_prediction.hpp"
#include "model/norm.hpp"
#include "model/output_layer_loss.hpp"
#include "model/parameter.hpp"
#include "model/parameter_units.hpp"
#include "model/transformer_layer.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {

/// One micro-batch, every array [micro_batch_size, seq_length] row-major as Megatron's batch.
/// A middle stage needs none of the arrays; the first stage reads tokens (and position_ids),
/// the last stage labels and loss_mask.
struct micro_batch {
  const std::int32_t* tokens = nullptr;
  const std::int32_t* labels = nullptr;
  const float* loss_mask = nullptr;
  const std::int32_t* position_ids = nullptr;  // null: 0..seq-1 (used by learned positions only)
  int micro_batch_size = 1;
  /// [micro_batch_size, seq]: the first position of each position's document, the keys its
  /// attention may see (--reset-attention-mask); null: causal attention over the whole sequence.
  const std::int32_t* document_start = nullptr;
};

/// Megatron's loss reduction pair: sum of loss * mask and sum of mask.
struct loss_and_count {
  double loss_sum = 0;
  double num_tokens = 0;
};

/// Which layers a chunk holds and whether it holds the model's ends.
struct chunk_layout {
  int layer_begin = 0;          ///< first global layer number (parameter names use it)
  int layer_end = 0;            ///< one past the last
  bool pre_process = true;      ///< holds the embedding (the first virtual pipeline stage)
  bool post_process = true;     ///< holds final norm, output layer and loss (the last one)
};

class gpt_chunk {
 public:
  /// Throws std::invalid_argument listing every config problem, a bad layer range, or a group
  /// whose size and rank differ from the config's tensor-parallel size and rank. With tied
  /// embeddings, a last stage without the embedding registers its own copy of
  /// embedding.word_embeddings.weight (initialized identically; keep it in sync by summing its
  /// gradient with the first stage's, as Megatron's embedding group does).
  /// cp: the context-parallel group (needed when config.context_parallel_size > 1); moe: the
  /// MoE layers' groups (model/moe_groups.hpp).
  gpt_chunk(const gpt_model_config& config, group& tp, chunk_layout layout, group* cp = nullptr, moe_groups moe = {});
  /// With config.init_model_with_meta_device (the parameters laid out, not yet held): holds and
  /// initializes only `ranges` of the flat layout (parameter_store::materialize_shard), to the
  /// values a whole initialization gives them.
  void materialize_shard(std::vector<held_range> ranges, std::size_t length);

  /// Forward of one micro-batch into `slot`. `input` is the previous stage's output [seq * mb,
  /// hidden] ([seq / tp * mb, hidden] with sequence parallelism; ignored with pre_process);
  /// `output` receives this chunk's output, of the same shape (ignored with post_process or
  /// when empty). Both are of activation_dtype(). With post_process the loss is computed and
  /// returned; when `keep` is set its gradient, scaled by grad_scale, is made at once (the
  /// output layer's weight gradient accumulates now) and kept for backward(slot). `keep` also
  /// keeps the slot for backward.
  /// `dropout_step` picks the dropout masks; `training` turns dropout on.
  loss_and_count forward(int slot, const micro_batch& batch, tensor::const_tensor_view input,
                         tensor::tensor_view output, bool training, bool keep, double grad_scale,
                         std::uint64_t dropout_step);
  /// Backward of the micro-batch kept in `slot`: from `grad_output` (ignored with post_process)
  /// to `grad_input` (ignored with pre_process); accumulates weight gradients; frees the slot.
  /// `progress`, when given, is told as each part's weight gradients are complete, in this
  /// order: backward_done_final_norm (post_process: the final norm and the output layer), each
  /// local layer index from the last to 0, then backward_done_embedding (pre_process).
  void backward(int slot, tensor::const_tensor_view grad_output, tensor::tensor_view grad_input,
                const std::function<void(int)>& progress = {});
  static constexpr int backward_done_embedding = -1;
  /// The final norm's event: the number of local layers.
  int backward_done_final_norm() const { return static_cast<int>(layers_.size()); }

  /// The loss mask's sum over this rank's positions of the micro-batch (Megatron's num_tokens).
  double loss_tokens(const micro_batch& batch) const;
  /// Elements of one activation or gradient passed between stages for `micro_batch_size`
  /// (this rank's sequence shard with sequence parallelism).
  std::size_t activation_numel(int micro_batch_size) const;
  /// With sequence parallelism, sums over the tensor-parallel group the gradients of the
  /// parameters used on sequence shards (norms, row-parallel biases), and with --qk-layernorm
  /// those of the per-head norms, as Megatron's finalize_model_grads does
  /// (_allreduce_non_tensor_model_parallel_grads); nothing at tp = 1. Call once per
  /// step, after the last backward and before the optimizer. `unit` >= 0: only that FSDP unit's
  /// (model/parameter_units.hpp), whose gradients alone are held (FSDP's per-unit buffers).
  void all_reduce_sequence_parallel_grads(int unit = -1);
  /// Slots kept for a backward that has not run yet.
  std::size_t slots_in_flight() const { return slots_.size(); }

  const chunk_layout& layout() const { return layout_; }
  const gpt_model_config& config() const { return config_; }
  std::vector<parameter>& parameters() { return store_.all(); }
  parameter_store& store() { return store_; }
  /// The dtype of parameters, gradients and activations (config.params_dtype).
  tensor::dtype dtype() const { return store_.type(); }
  /// The dtype of the activations and gradients passed between stages: the residual stream's
  /// (fp32 under --fp32-residual-connection, otherwise the model's).
  tensor::dtype activation_dtype() const { return config_.residual_dtype(); }
  void zero_grad() { store_.zero_grad(); }
  /// The gradient each MoE layer's auxiliary losses enter the backward with (Megatron's
  /// MoEAuxLossAutoScaler.set_loss_scale: the loss scale / the number of micro-batches).
  void set_moe_aux_loss_scale(double scale) {
    for (auto& l : layers_)
      if (auto* m = l.moe()) m->set_aux_loss_scale(scale);
    if (mtp_)
      for (auto* l : mtp_->layers())
        if (auto* m = l->moe()) m->set_aux_loss_scale(scale);
  }
  /// Adds each local MoE layer's auxiliary losses of its last forward (divided by their
  /// coefficients, as Megatron's tracker holds them) to totals[k * (num_layers + mtp_num_layers) + layer],
  /// k as moe_aux_loss_kinds orders them; layer is global, 0-based.
  /// The MoE routers of this chunk's layers, in layer order (empty for a dense model).
  std::vector<moe_router*> moe_routers() {
    std::vector<moe_router*> out;
    for (auto& l : layers_)
      if (auto* m = l.moe()) out.push_back(&m->router());
    if (mtp_)
      for (auto* l : mtp_->layers())
        if (auto* m = l->moe()) out.push_back(&m->router());
    return out;
  }
  void add_moe_aux_losses(std::vector<double>& totals) const {
    const std::size_t n = std::size_t(config_.num_layers + config_.mtp_num_layers);
    auto add = [&](const moe_layer& m, std::size_t layer) {
      const auto& l = m.router().aux_losses();
      totals[layer] += l.load_balancing_loss;
      totals[n + layer] += l.seq_load_balancing_loss;
      totals[2 * n + layer] += l.global_load_balancing_loss;
      totals[3 * n + layer] += l.z_loss;
    };
    for (std::size_t i = 0; i < layers_.size(); ++i)
      if (const auto* m = layers_[i].moe()) add(*m, std::size_t(layout_.layer_begin) + i);
    // Megatron builds the MTP depths' transformer layers with the default layer number, so their
    // routers log into the entry of this stage's first layer.
    if (mtp_)
      for (auto* l : mtp_->layers())
        if (const auto* m = l->moe()) add(*m, std::size_t(layout_.layer_begin));
  }
  /// The backward scale of the multi-token prediction losses (Megatron's
  /// MTPLossAutoScaler.set_loss_scale: the loss scale / the number of micro-batches), and whether
  /// each depth's loss is a sum over its tokens (--calculate-per-token-loss) rather than a mean.
  void set_mtp_loss_scale(double scale, bool per_token = false) { mtp_scale_ = scale, mtp_per_token_ = per_token; }
  /// The multi-token prediction depths (0 without them or off the last stage).
  int mtp_depths() const { return mtp_ ? mtp_->depths() : 0; }
  /// Megatron's MTPLossLoggingHelper tracker: each depth's sum(mask * loss) / sum(mask) summed
  /// over this step's training forwards; returned and cleared.
  std::vector<double> take_mtp_losses() {
    auto out = mtp_tracker_;
    std::fill(mtp_tracker_.begin(), mtp_tracker_.end(), 0.0);
    return out;
  }
  /// The delayed fp8 recipe's amax reduction group (model/fp8_amax_reduction.hpp): each
  /// forward and backward of this chunk ends with its linears' amaxes all-reduced (MAX) over it
  /// before their scales update; null (the default) keeps them to this rank.
  void set_amax_group(group* g) { amax_->set_group(g); }
  /// The id of the word-embedding parameter (this chunk's own or its tied copy), or -1.
  int word_embeddings_id() const { return word_embeddings_; }
  /// FSDP's units (model/parameter_units.hpp): told before and after each unit's compute; null
  /// (the default) while every parameter stays bound.
  void set_parameter_units(parameter_units* units) { units_ = units; }
  int num_units() const { return static_cast<int>(layers_.size()) + 2; }
  /// parameter_unit of parameter p, for this chunk.
  int unit_of(const parameter& p) const {
    return parameter_unit(p.name, layout_.layer_begin, static_cast<int>(layers_.size()));
  }

 private:
  struct saved {
    std::uint64_t step = 0;
    int micro_batch_size = 1;
    std::vector<std::int32_t> ids, positions, labels;
    std::vector<std::int32_t> document_start;  // the micro-batch's, [batch, seq]; empty: causal
    std::vector<float> mask;
    /// On a device, the arrays its kernels read (ids, positions, labels, document starts) as
    /// copies in its memory; empty on the host, where the kernels read the vectors above.
    tensor::index_array device_ids, device_positions, device_labels, device_document_start;
    tensor::tensor input, loss_grad;
    std::vector<tensor::tensor> mtp_grads;  // each MTP depth's output gradient
    /// The layers' activations of this micro-batch while another one's forward or backward ran
    /// (null while they are in the layers).
    std::unique_ptr<activation_stash> stash;
  };
  /// Before a forward or a backward of another micro-batch: the resident micro-batch's
  /// activations, still needed by its backward, move into its stash.
  void park_resident();
  /// The chunk's own tensors and its parts' saved state, into the stash or back out.
  void carry_activations(activation_stash& s);
  void load_batch(const micro_batch& batch, saved& s) const;
  /// Points every attention at the micro-batch's document mask (before its forward or backward).
  void use_document_mask(const saved& s);
  int local_rows(int micro_batch_size) const;
  void run_forward(const saved& s, bool training);
  /// Reruns a checkpointed group's forward (its input gathered first when distributed).
  void recompute_group(std::size_t g, const saved& s);
  /// With distribute_saved_activations: keeps this rank's part of stream_[begin], frees the rest.
  void distribute_group_input(std::size_t g);
  tensor::tensor_view stream(int i, const saved& s);
  void use_unit(int unit, bool forward) {
    if (units_) units_->use(unit, forward);
  }
  void done_unit(int unit, bool forward) {
    if (units_) units_->done(unit, forward);
  }
  /// The final norm, the output layer and the MTP depths' unit, with the word table's when the
  /// output layer or MTP reads it.
  void use_post_units(bool forward);
  void done_post_units(bool forward);
  /// The output layer or the MTP depths read this chunk's word table (unit 0).
  bool post_reads_word_table() const { return config_.shares_word_embedding() && word_embeddings_ >= 0; }

  gpt_model_config config_;
  group& tp_;
  chunk_layout layout_;
  sequence_shard shard_;
  parameter_store store_;
  std::optional<language_model_embedding> embedding_;
  std::vector<decoder_layer> layers_;
  std::vector<layer_group> groups_;  // the layers cut for full recomputation
  std::vector<tensor::tensor> distributed_;  // per group: this rank's part of its input
  std::optional<norm> final_layernorm_;
  std::unique_ptr<output_layer_loss> output_;
  std::optional<multi_token_prediction> mtp_;
  double mtp_scale_ = 1.0;
  bool mtp_per_token_ = false;
  std::vector<double> mtp_tracker_;
  int word_embeddings_ = -1;
  std::unique_ptr<fp8_amax_reduction> amax_;  // the chunk is TE's fp8_autocast region
  parameter_units* units_ = nullptr;
  std::unordered_map<int, saved> slots_;
  int resident_ = -1;  // the slot whose activations the layers hold now
  // The residual stream entering each layer (and leaving the last), the final norm's output.
  // Under full recomputation only the checkpointed groups' inputs stay between forward and
  // backward; the entries inside a group are freed and recomputed.
  std::vector<tensor::tensor> stream_;
  tensor::tensor final_, grad_a_;
};

}  // namespace mactor::model
