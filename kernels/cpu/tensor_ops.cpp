// Tensor-level element-wise operations: the CPU implementations behind the dtype dispatch.
#include "kernels/tensor_ops.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/dispatch.hpp"

namespace mactor::kernels {

void check_same_type(const char* kernel, std::initializer_list<tensor::const_tensor_view> views) {
  const auto& first = *views.begin();
  for (const auto& v : views)
    if (v.type != first.type || v.where != first.where)
      throw tensor::tensor_error(std::string("kernel ") + kernel + " got a " + std::string(tensor::short_name(v.type)) +
                                 " tensor on " + tensor::to_string(v.where) + " beside a " +
                                 std::string(tensor::short_name(first.type)) + " one on " +
                                 tensor::to_string(first.where));
}

void scale(tensor::tensor_view x, double factor) {
  dispatch_floating("scale", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    const T f = static_cast<T>(factor);
    for (T& v : x.host<T>()) v *= f;
  });
}

void copy(tensor::tensor_view dst, tensor::const_tensor_view src) {
  check_same_type("copy", {dst, src});
  if (dst.numel() != src.numel())
    throw tensor::tensor_error("kernel copy: " + std::to_string(src.numel()) + " elements into " +
                               std::to_string(dst.numel()));
  dispatch_floating("copy", dst.type, dst.where, [&](auto zero) {
    using T = decltype(zero);
    auto in = src.host<T>();
    std::copy(in.begin(), in.end(), dst.host<T>().begin());
  });
}

void fill_zero(tensor::tensor_view x) {
  dispatch_floating("fill_zero", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    auto out = x.host<T>();
    std::fill(out.begin(), out.end(), T(0));
  });
}

}  // namespace mactor::kernels
