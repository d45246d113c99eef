// Tensor-level element-wise operations: the CPU implementations behind the dtype dispatch.
#include "kernels/tensor_ops.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::kernels {

namespace detail {

void need(const char* kernel, const char* argument, const tensor::const_tensor_view& v,
          std::int64_t n) {
  if (!v.data && n > 0)
    throw tensor::tensor_error(std::string("kernel ") + kernel + ": argument " + argument +
                               " is missing (" + std::to_string(n) + " elements needed)");
  if (v.numel() < n)
    throw tensor::tensor_error(std::string("kernel ") + kernel + ": argument " + argument +
                               " holds " + std::to_string(v.numel()) + " elements " +
                               tensor::to_string(v.shape) + ", " + std::to_string(n) +
                               " needed");
}

void need_optional(const char* kernel, const char* argument, const tensor::const_tensor_view& v,
                   std::int64_t n) {
  if (v.data) need(kernel, argument, v, n);
}

}  // namespace detail

void check_same_type(const char* kernel, std::initializer_list<tensor::const_tensor_view> views) {
  // An empty view is an optional argument left out: it has no type to agree on.
  const tensor::const_tensor_view* first_ptr = nullptr;
  for (const auto& v : views)
    if (v.data) { first_ptr = &v; break; }
  if (!first_ptr) return;
  const auto& first = *first_ptr;
  for (const auto& v : views)
    if (v.data && (v.type != first.type || v.where != first.where))
      throw tensor::tensor_error(std::string("kernel ") + kernel + " got a " + std::string(tensor::short_name(v.type)) +
                                 " tensor on " + tensor::to_string(v.where) + " beside a " +
                                 std::string(tensor::short_name(first.type)) + " one on " +
                                 tensor::to_string(first.where));
}

void scale(tensor::tensor_view x, double factor) {
  if (on_device(x)) return device_kernels_for("scale", x).scale(x, factor);
  detail::fp32_stage stage;
  dispatch_compute("scale", x.type, x.where, [&](auto zero) {
    using T = decltype(zero);
    const T f = static_cast<T>(factor);
    T* v = stage.typed<T>(x);
    const std::int64_t n = x.numel();
    for (std::int64_t i = 0; i < n; ++i) v[i] *= f;
  });
}

void add(tensor::tensor_view dst, tensor::const_tensor_view src) {
  check_same_type("add", {dst, src});
  if (dst.numel() != src.numel())
    throw tensor::tensor_error("kernel add: " + std::to_string(src.numel()) + " elements into " +
                               std::to_string(dst.numel()));
  if (on_device(dst)) return device_kernels_for("add", dst).add(dst, src);
  detail::fp32_stage stage;
  dispatch_compute("add", dst.type, dst.where, [&](auto zero) {
    using T = decltype(zero);
    T* d = stage.typed<T>(dst);
    const T* s = stage.typed<T>(src);
    const std::int64_t n = dst.numel();
    for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

// Copies and zeroes are byte-level: any dtype, the fp8 ones included.
void copy(tensor::tensor_view dst, tensor::const_tensor_view src) {
  check_same_type("copy", {dst, src});
  if (dst.numel() != src.numel())
    throw tensor::tensor_error("kernel copy: " + std::to_string(src.numel()) + " elements into " +
                               std::to_string(dst.numel()));
  if (on_device(dst)) return device_kernels_for("copy", dst).copy(dst, src);
  if (dst.nbytes()) std::memmove(dst.data, src.data, dst.nbytes());
}

void fill_zero(tensor::tensor_view x) {
  if (on_device(x)) return device_kernels_for("fill_zero", x).fill_zero(x);
  if (x.nbytes()) std::memset(x.data, 0, x.nbytes());
}

}  // namespace mactor::kernels
