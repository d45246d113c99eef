// What the tensor entry points of the CPU kernels share: typed pointers out of views (the dtype
// and device checked), and bounds checks that name the kernel and the argument.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dispatch.hpp"

namespace mactor::kernels::detail {

/// The view's elements as T*, or null for an empty view (an optional argument left out).
template <class T>
T* typed(const tensor::tensor_view& v) {
  return v.data ? v.host<T>().data() : nullptr;
}
template <class T>
const T* typed(const tensor::const_tensor_view& v) {
  return v.data ? v.host<T>().data() : nullptr;
}

/// Throws tensor_error naming kernel and argument unless v holds at least n elements.
void need(const char* kernel, const char* argument, const tensor::const_tensor_view& v,
          std::int64_t n);
/// The same for an optional argument: an empty view passes.
void need_optional(const char* kernel, const char* argument, const tensor::const_tensor_view& v,
                   std::int64_t n);

}  // namespace mactor::kernels::detail
