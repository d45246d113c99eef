// The reductions on the CPU: one pass in element order, in double.
#include "kernels/reductions.hpp"

#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {

double sum_of_squares(tensor::const_tensor_view x) {
  if (on_device(x)) return device_kernels_for("sum_of_squares", x).sum_of_squares(x);
  return dispatch_floating("sum_of_squares", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    const T* v = static_cast<const T*>(x.data);
    double sum = 0.0;
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i) {
      const double e = v[i];
      sum += e * e;
    }
    return sum;
  });
}

double count_zeros(tensor::const_tensor_view x) {
  if (on_device(x)) return device_kernels_for("count_zeros", x).count_zeros(x);
  return dispatch_floating("count_zeros", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    const T* v = static_cast<const T*>(x.data);
    double zeros = 0.0;
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i) zeros += v[i] == T(0) ? 1.0 : 0.0;
    return zeros;
  });
}

}  // namespace mactor::kernels
