// Megatron-Core's MambaMixer (Mamba-2): in_proj to [z, x, B, C, dt], a causal depthwise conv1d
// with SiLU over xBC, the SSD scan (dt softplus with dt_bias, A = -exp(A_log), D skip, B and C
// shared by each group's heads), RMSNorm of y * silu(z) per group, out_proj.
// Tensor parallelism splits heads and groups as Megatron does: each rank's in_proj rows are its
// own block of each of z, x, B, C and dt (tp_split::row_segments), its conv1d channels its block
// of each of x, B and C, its dt_bias, A_log, D and norm weight its heads' and groups' entries;
// out_proj is row-parallel. With sequence parallelism the mixer's input and output are this
// rank's sequence shard (in_proj gathers it, out_proj reduce-scatters back). With context
// parallelism the conv and the scan run on the whole sequence of a share of the heads
// (model/mamba_context_parallel.hpp).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/ssd_scan.hpp"
#include "model/activation.hpp"
#include "model/activation_stash.hpp"
#include "model/context_parallel.hpp"
#include "model/fp8_recipe.hpp"
#include "model/group.hpp"
#include "model/mamba_context_parallel.hpp"
#include "model/parameter.hpp"
#include "model/tensor_parallel_linear.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

/// --mamba-state-dim, --mamba-head-dim, --mamba-num-groups, --mamba-num-heads and the mixer's
/// fixed arguments in Megatron (d_conv 4, expand 2, chunk 128, norm_before_gate False).
struct mamba_mixer_config {
  int hidden_size = 0;
  int state_dim = 128;          // --mamba-state-dim
  int head_dim = 64;            // --mamba-head-dim
  int num_groups = 8;           // --mamba-num-groups
  int num_heads = 0;            // --mamba-num-heads; 0: expand * hidden / head_dim
  int conv_width = 4;           // d_conv
  int expand = 2;
  int chunk_size = 128;
  double norm_epsilon = 1e-5;
  double init_method_std = 0.02;
  bool sequence_parallel = false;
  int num_layers = 1;           // out_proj's std: init_method_std / sqrt(num_layers) (MambaStack's _init_weights)
  /// in_proj's and out_proj's GEMMs under fp8 (Transformer Engine's linears in mamba_stack_spec).
  fp8_settings fp8;
  int heads() const { return num_heads > 0 ? num_heads : expand * hidden_size / head_dim; }
  int d_inner() const { return heads() * head_dim; }
  int conv_dim() const { return d_inner() + 2 * num_groups * state_dim; }
  int in_proj_out() const { return d_inner() + conv_dim() + heads(); }
};

class mamba_mixer {
 public:
  /// Registers name.in_proj.weight, name.conv1d.weight/bias, name.dt_bias, name.A_log, name.D,
  /// name.norm.weight, name.out_proj.weight (Megatron's state-dict names). tp_size must divide
  /// the heads and the groups. cp: the context-parallel group of `shard` (null for one rank).
  mamba_mixer(parameter_store& store, const std::string& name, const mamba_mixer_config& config,
              int tp_size, group* cp = nullptr, const sequence_shard& shard = {});
  /// After store.allocate(): Megatron's draws for what the store cannot express: A_log =
  /// log(uniform(1, 16)), dt_bias = softplus^-1(dt), dt log-uniform in [0.001, 0.1] floored at
  /// 1e-4, conv1d weight and bias uniform(+-1/sqrt(d_conv)) (torch's Conv1d default). D = 1.
  void initialize(parameter_store& store, std::uint64_t seed, int tp_rank = 0) const;
  /// out[rows, hidden] = mixer(x[rows, hidden]), rows = seq * batch in [seq, batch] order (with
  /// sequence parallelism x and out are this rank's rows / tp; with context parallelism seq is
  /// this rank's positions, in the shard's order).
  void forward(const parameter_store& store, group& tp, tensor::const_tensor_view x,
               tensor::tensor_view out, int seq, int batch);
  /// dx[rows, hidden] from dout; parameter gradients accumulate.
  void backward(parameter_store& store, group& tp, tensor::const_tensor_view dout,
                tensor::const_tensor_view x, tensor::tensor_view dx);
  void release();
  /// The state the backward reads from the last forward, into the stash or back out
  /// (activation_stash.hpp); under context parallelism the scan's share and its conv rows too.
  void carry(activation_stash& s) {
    s.carry(seq_, batch_, scan_seq_, z_, xbc_, dt_, x_, B_, C_, states_, y_, rstd_, normed_, conv_weight_cp_,
            conv_bias_cp_);
  }

 private:
  kernels::ssd_shape shape() const;
  // This rank's share: heads, groups, d_inner, conv channels, in_proj rows.
  int heads() const { return c_.heads() / tp_; }
  int groups() const { return c_.num_groups / tp_; }
  int d_inner() const { return c_.d_inner() / tp_; }
  int conv_dim() const { return c_.conv_dim() / tp_; }
  int in_proj_out() const { return c_.in_proj_out() / tp_; }
  void scan_inputs_from_conv(tensor::dtype type);
  // Context parallelism: in_proj's x, B, C and dt to the scan's share (xbc_, dt_); the scan's
  // gradients back into dzxbcdt's columns; y or dy between the two shardings.
  void exchange_to_heads(tensor::const_tensor_view zxbcdt);
  void exchange_grads_to_sequence(tensor::tensor_view dzxbcdt, tensor::const_tensor_view dxbc,
                                  tensor::const_tensor_view ddt);
  void move_y(bool to_heads, tensor::const_tensor_view from, tensor::tensor_view to);
  void gated_norm_backward(parameter_store& store, tensor::const_tensor_view dnormed, tensor::tensor_view dy,
                           tensor::tensor_view dz);
  void conv_backward(parameter_store& store, tensor::const_tensor_view dact, tensor::tensor_view dxbc);
  void conv_gradients(parameter_store& store, tensor::tensor_view dx, tensor::const_tensor_view dact,
                      tensor::const_tensor_view x, tensor::const_tensor_view w, tensor::const_tensor_view bias,
                      int batch, int seq, bool weights);
  tensor::const_tensor_view conv_weight(const parameter_store& store) const;
  tensor::const_tensor_view conv_bias(const parameter_store& store) const;
  template <class View>
  auto head_slice(View v) const { return elements(v, cp_.head_offset(), cp_.heads()); }

  mamba_mixer_config c_;
  int tp_;
  mamba_context_parallel cp_;
  int seq_ = 0, batch_ = 0, scan_seq_ = 0;  // scan_seq_: the whole sequence under context parallelism
  int conv_weight_, conv_bias_, dt_bias_, A_log_, D_, norm_weight_;
  column_parallel_linear in_proj_;
  row_parallel_linear out_proj_;
  // saved: in_proj's output, z/xBC/dt and the conv output in [batch, seq] rows, the scan's x, B,
  // C and chunk states, y, the norm's rstd and its output back in [seq, batch] rows
  tensor::tensor zxbcdt_, z_, xbc_, dt_, xbc_act_, x_, B_, C_, states_, y_, rstd_, normed_;
  tensor::tensor scratch_a_, scratch_b_, scratch_c_;  // backward scratch
  tensor::tensor conv_weight_cp_, conv_bias_cp_;      // this context-parallel rank's conv rows
};

}  // namespace mactor::model
