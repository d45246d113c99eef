// Column- and row-parallel linear layers over the kernels' GEMM.
#include "model/tensor_parallel_linear.hpp"

#include "kernels/bias.hpp"
#include "kernels/gemm.hpp"
#include "model/activation.hpp"
#include "model/linear_gemms.hpp"

namespace mactor::model {
namespace {

std::unique_ptr<fp8_linear> make_fp8(const fp8_settings& fp8) {
  return fp8.enabled ? std::make_unique<fp8_linear>(fp8) : nullptr;
}

// db += colsum(dy[rows, out]): now, or in a zero-bubble schedule's weight pass.
void add_bias_grad(parameter_store& store, int bias, tensor::const_tensor_view dy, int rows, int out) {
  if (bias < 0) return;
  store.weight_grads().add({dy}, [&store, bias, rows, out](auto in) {
    kernels::bias_backward(store.grad(bias), in[0], rows, out);
  });
}

}  // namespace

column_parallel_linear::column_parallel_linear(parameter_store& store, const std::string& name,
                                               int in, int out, bool bias, tp_split split,
                                               double init_std, int tp_size,
                                               bool sequence_parallel, const fp8_settings& fp8)
    : in_(in), out_local_(out / tp_size), sequence_parallel_(sequence_parallel && tp_size > 1),
      fp8_(make_fp8(fp8)) {
  weight_ = store.add(name + ".weight", {out, in}, split, init_kind::normal, init_std);
  store[weight_].fp8_gemm = fp8_.get();
  if (fp8_) store.add_fp8_linear(fp8_.get(), weight_);
  if (bias) bias_ = store.add(name + ".bias", {out}, split, init_kind::zeros);
}

void column_parallel_linear::forward(const parameter_store& store, group& tp,
                                     tensor::const_tensor_view x, tensor::tensor_view y,
                                     int rows) {
  if (sequence_parallel_) {
    tp.all_gather(elements(x, 0, std::int64_t(rows / tp.size()) * in_),
                  ensure_activation(gathered_, rows, in_, x.type));
    x = gathered_;
  }
  linear_gemm_forward(fp8_.get(), x, store.value(weight_), y, rows, in_, out_local_);
  if (bias_ >= 0) kernels::bias_add(y, store.value(bias_), rows, out_local_);
}

void column_parallel_linear::backward(parameter_store& store, group& tp,
                                      tensor::const_tensor_view dy, tensor::const_tensor_view x,
                                      tensor::tensor_view dx, int rows) {
  if (sequence_parallel_) {
    // Megatron saves only the shard and gathers it again for the weight gradient.
    tp.all_gather(elements(x, 0, std::int64_t(rows / tp.size()) * in_),
                  ensure_activation(gathered_, rows, in_, x.type));
    x = gathered_;
  }
  add_bias_grad(store, bias_, dy, rows, out_local_);
  if (sequence_parallel_) {
    auto full = ensure_activation(scratch_, rows, in_, dy.type);
    linear_gemm_backward(store, fp8_.get(), weight_, dy, x, full, rows, in_, out_local_);
    tp.reduce_scatter_sum(full, elements(dx, 0, std::int64_t(rows / tp.size()) * in_));
    return;
  }
  linear_gemm_backward(store, fp8_.get(), weight_, dy, x, dx, rows, in_, out_local_);
  if (tp.size() > 1) tp.all_reduce_sum(elements(dx, 0, std::int64_t(rows) * in_));
}

void column_parallel_linear::release() {
  gathered_ = tensor::tensor();
  scratch_ = tensor::tensor();
  if (fp8_) fp8_->release();
}

row_parallel_linear::row_parallel_linear(parameter_store& store, const std::string& name, int in,
                                         int out, bool bias, double init_std, int tp_size,
                                         bool sequence_parallel, const fp8_settings& fp8)
    : in_local_(in / tp_size), out_(out), sequence_parallel_(sequence_parallel && tp_size > 1),
      fp8_(make_fp8(fp8)) {
  weight_ = store.add(name + ".weight", {out, in}, tp_split::columns, init_kind::normal, init_std);
  store[weight_].fp8_gemm = fp8_.get();
  if (fp8_) store.add_fp8_linear(fp8_.get(), weight_);
  if (bias) {
    bias_ = store.add(name + ".bias", {out}, tp_split::replicated, init_kind::zeros);
    store[bias_].sequence_parallel = sequence_parallel_;
  }
}

void row_parallel_linear::forward(const parameter_store& store, group& tp,
                                  tensor::const_tensor_view x, tensor::tensor_view y, int rows) {
  if (sequence_parallel_) {
    auto full = ensure_activation(full_, rows, out_, x.type);
    linear_gemm_forward(fp8_.get(), x, store.value(weight_), full, rows, in_local_, out_);
    tp.reduce_scatter_sum(full, elements(y, 0, std::int64_t(rows / tp.size()) * out_));
    return;
  }
  linear_gemm_forward(fp8_.get(), x, store.value(weight_), y, rows, in_local_, out_);
  if (tp.size() > 1) tp.all_reduce_sum(elements(y, 0, std::int64_t(rows) * out_));
}

void row_parallel_linear::backward(parameter_store& store, group& tp,
                                   tensor::const_tensor_view dy, tensor::const_tensor_view x,
                                   tensor::tensor_view dx, int rows) {
  if (sequence_parallel_) {
    const int shard_rows = rows / tp.size();
    add_bias_grad(store, bias_, dy, shard_rows, out_);
    auto full = ensure_activation(full_, rows, out_, dy.type);
    tp.all_gather(elements(dy, 0, std::int64_t(shard_rows) * out_), full);
    dy = full;
  } else {
    add_bias_grad(store, bias_, dy, rows, out_);
  }
  linear_gemm_backward(store, fp8_.get(), weight_, dy, x, dx, rows, in_local_, out_);
}

void row_parallel_linear::release() {
  full_ = tensor::tensor();
  if (fp8_) fp8_->release();
}

}  // namespace mactor::model
