// Column- and row-parallel linear layers over the kernels' GEMM.
#include "model/tensor_parallel_linear.hpp"

#include "kernels/bias.hpp"
#include "kernels/gemm.hpp"

namespace mactor::model {

template <typename T>
column_parallel_linear<T>::column_parallel_linear(parameter_store<T>& store,
                                                  const std::string& name, int in, int out,
                                                  bool bias, tp_split split, double init_std,
                                                  int tp_size)
    : in_(in), out_local_(out / tp_size) {
  weight_ = store.add(name + ".weight", {out, in}, split, init_kind::normal, init_std);
  if (bias) bias_ = store.add(name + ".bias", {out}, split, init_kind::zeros);
}

template <typename T>
void column_parallel_linear<T>::forward(const parameter_store<T>& store, const T* x, T* y,
                                        int rows) const {
  kernels::linear_forward<T>(x, store.value(weight_), y, rows, in_, out_local_);
  if (bias_ >= 0) kernels::bias_add<T>(y, store.value(bias_), rows, out_local_);
}

template <typename T>
void column_parallel_linear<T>::backward(parameter_store<T>& store, group& tp, const T* dy,
                                         const T* x, T* dx, int rows) const {
  kernels::linear_backward_weight<T>(dy, x, store.grad(weight_), rows, in_, out_local_);
  if (bias_ >= 0) kernels::bias_backward<T>(store.grad(bias_), dy, rows, out_local_);
  kernels::linear_backward_input<T>(dy, store.value(weight_), dx, rows, in_, out_local_);
  if (tp.size() > 1) tp.all_reduce_sum(dx, std::size_t(rows) * in_);
}

template <typename T>
row_parallel_linear<T>::row_parallel_linear(parameter_store<T>& store, const std::string& name,
                                            int in, int out, bool bias, double init_std,
                                            int tp_size)
    : in_local_(in / tp_size), out_(out) {
  weight_ = store.add(name + ".weight", {out, in}, tp_split::columns, init_kind::normal, init_std);
  if (bias) bias_ = store.add(name + ".bias", {out}, tp_split::replicated, init_kind::zeros);
}

template <typename T>
void row_parallel_linear<T>::forward(const parameter_store<T>& store, group& tp, const T* x, T* y,
                                     int rows) const {
  kernels::linear_forward<T>(x, store.value(weight_), y, rows, in_local_, out_);
  if (tp.size() > 1) tp.all_reduce_sum(y, std::size_t(rows) * out_);
}

template <typename T>
void row_parallel_linear<T>::backward(parameter_store<T>& store, const T* dy, const T* x, T* dx,
                                      int rows) const {
  if (bias_ >= 0) kernels::bias_backward<T>(store.grad(bias_), dy, rows, out_);
  kernels::linear_backward_weight<T>(dy, x, store.grad(weight_), rows, in_local_, out_);
  kernels::linear_backward_input<T>(dy, store.value(weight_), dx, rows, in_local_, out_);
}

template class column_parallel_linear<float>;
template class column_parallel_linear<double>;
template class row_parallel_linear<float>;
template class row_parallel_linear<double>;

}  // namespace mactor::model
