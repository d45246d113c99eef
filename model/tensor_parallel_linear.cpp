// Column- and row-parallel linear layers over the kernels' GEMM.
#include "model/tensor_parallel_linear.hpp"

#include "kernels/bias.hpp"
#include "kernels/gemm.hpp"

namespace mactor::model {

template <typename T>
column_parallel_linear<T>::column_parallel_linear(parameter_store<T>& store,
                                                  const std::string& name, int in, int out,
                                                  bool bias, tp_split split, double init_std,
                                                  int tp_size, bool sequence_parallel)
    : in_(in), out_local_(out / tp_size), sequence_parallel_(sequence_parallel && tp_size > 1) {
  weight_ = store.add(name + ".weight", {out, in}, split, init_kind::normal, init_std);
  if (bias) bias_ = store.add(name + ".bias", {out}, split, init_kind::zeros);
}

template <typename T>
void column_parallel_linear<T>::forward(const parameter_store<T>& store, group& tp, const T* x,
                                        T* y, int rows) {
  if (sequence_parallel_) {
    gathered_.resize(std::size_t(rows) * in_);
    tp.all_gather(x, gathered_.data(), std::size_t(rows / tp.size()) * in_);
    x = gathered_.data();
  }
  kernels::linear_forward<T>(x, store.value(weight_), y, rows, in_, out_local_);
  if (bias_ >= 0) kernels::bias_add<T>(y, store.value(bias_), rows, out_local_);
}

template <typename T>
void column_parallel_linear<T>::backward(parameter_store<T>& store, group& tp, const T* dy,
                                         const T* x, T* dx, int rows) {
  const std::size_t full = std::size_t(rows) * in_;
  if (sequence_parallel_) x = gathered_.data();
  kernels::linear_backward_weight<T>(dy, x, store.grad(weight_), rows, in_, out_local_);
  if (bias_ >= 0) kernels::bias_backward<T>(store.grad(bias_), dy, rows, out_local_);
  if (sequence_parallel_) {
    scratch_.resize(full);
    kernels::linear_backward_input<T>(dy, store.value(weight_), scratch_.data(), rows, in_,
                                      out_local_);
    tp.reduce_scatter_sum(scratch_.data(), dx, full / tp.size());
    return;
  }
  kernels::linear_backward_input<T>(dy, store.value(weight_), dx, rows, in_, out_local_);
  if (tp.size() > 1) tp.all_reduce_sum(dx, full);
}

template <typename T>
row_parallel_linear<T>::row_parallel_linear(parameter_store<T>& store, const std::string& name,
                                            int in, int out, bool bias, double init_std,
                                            int tp_size, bool sequence_parallel)
    : in_local_(in / tp_size), out_(out), sequence_parallel_(sequence_parallel && tp_size > 1) {
  weight_ = store.add(name + ".weight", {out, in}, tp_split::columns, init_kind::normal, init_std);
  if (bias) {
    bias_ = store.add(name + ".bias", {out}, tp_split::replicated, init_kind::zeros);
    store[bias_].sequence_parallel = sequence_parallel_;
  }
}

template <typename T>
void row_parallel_linear<T>::forward(const parameter_store<T>& store, group& tp, const T* x, T* y,
                                     int rows) {
  const std::size_t full = std::size_t(rows) * out_;
  if (sequence_parallel_) {
    full_.resize(full);
    kernels::linear_forward<T>(x, store.value(weight_), full_.data(), rows, in_local_, out_);
    tp.reduce_scatter_sum(full_.data(), y, full / tp.size());
    return;
  }
  kernels::linear_forward<T>(x, store.value(weight_), y, rows, in_local_, out_);
  if (tp.size() > 1) tp.all_reduce_sum(y, full);
}

template <typename T>
void row_parallel_linear<T>::backward(parameter_store<T>& store, group& tp, const T* dy,
                                      const T* x, T* dx, int rows) {
  if (sequence_parallel_) {
    const std::size_t shard = std::size_t(rows / tp.size()) * out_;
    if (bias_ >= 0) kernels::bias_backward<T>(store.grad(bias_), dy, rows / tp.size(), out_);
    full_.resize(shard * tp.size());
    tp.all_gather(dy, full_.data(), shard);
    dy = full_.data();
  } else if (bias_ >= 0) {
    kernels::bias_backward<T>(store.grad(bias_), dy, rows, out_);
  }
  kernels::linear_backward_weight<T>(dy, x, store.grad(weight_), rows, in_local_, out_);
  kernels::linear_backward_input<T>(dy, store.value(weight_), dx, rows, in_local_, out_);
}

template class column_parallel_linear<float>;
template class column_parallel_linear<double>;
template class row_parallel_linear<float>;
template class row_parallel_linear<double>;

}  // namespace mactor::model
