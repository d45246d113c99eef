// Bias add over rows and its backward (column sums).
#pragma once

namespace mactor::kernels {

/// y[n, w] += bias[w]
template <typename T>
void bias_add(T* y, const T* bias, int n, int w);

/// dbias[w] += sum over rows of dy[n, w]
template <typename T>
void bias_backward(T* dbias, const T* dy, int n, int w);

}  // namespace mactor::kernels
