// A linear layer's GEMMs, fp8 or not, with the weight gradient deferrable.
#include "model/linear_gemms.hpp"

#include "kernels/gemm.hpp"

namespace mactor::model {

void linear_gemm_forward(fp8_linear* fp8, tensor::const_tensor_view x, tensor::const_tensor_view w,
                         tensor::tensor_view y, int rows, int in, int out) {
  if (fp8) return fp8->forward(x, w, y, rows, in, out);
  kernels::linear_forward(x, w, y, rows, in, out);
}

void linear_gemm_backward(parameter_store& store, fp8_linear* fp8, int weight, tensor::const_tensor_view dy,
                          tensor::const_tensor_view x, tensor::tensor_view dx, int rows, int in, int out) {
  const auto weight_grad = [&store, weight, rows, in, out](tensor::const_tensor_view a, tensor::const_tensor_view b) {
    store.weight_grads().add({a, b}, [&store, weight, rows, in, out](auto v) {
      kernels::linear_backward_weight(v[0], v[1], store.grad(weight), rows, in, out);
    });
  };
  // fp8: the weight-gradient GEMM's operands are quantized as it reads them, then deferred alike.
  if (fp8) return fp8->backward(dy, x, store.value(weight), weight_grad, dx, rows, in, out);
  weight_grad(dy, x);
  kernels::linear_backward_input(dy, store.value(weight), dx, rows, in, out);
}

}  // namespace mactor::model
