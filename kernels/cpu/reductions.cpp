// The reductions on the CPU: one pass in element order, in double.
#include "kernels/reductions.hpp"

#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {

namespace {

// The sum over x's elements of term(element widened to double), in element order.
template <class Term>
double sum_over_elements(const char* kernel, const tensor::const_tensor_view& x, Term term) {
  return dispatch_floating(kernel, x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    const T* v = static_cast<const T*>(x.data);
    double sum = 0.0;
    for (std::int64_t i = 0, n = x.numel(); i < n; ++i) sum += term(double(v[i]));
    return sum;
  });
}

}  // namespace

double sum_of_squares(tensor::const_tensor_view x) {
  if (on_device(x)) return device_kernels_for("sum_of_squares", x).sum_of_squares(x);
  return sum_over_elements("sum_of_squares", x, [](double e) { return e * e; });
}

double count_zeros(tensor::const_tensor_view x) {
  if (on_device(x)) return device_kernels_for("count_zeros", x).count_zeros(x);
  return sum_over_elements("count_zeros", x, [](double e) { return e == 0.0 ? 1.0 : 0.0; });
}

}  // namespace mactor::kernels
