// What the tensor entry points of the CPU kernels share: typed pointers out of views (the dtype
// and device checked; 16-bit tensors staged in fp32), and bounds checks that name the kernel
// and the argument.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/convert.hpp"

namespace mactor::kernels::detail {

/// The typed pointers of one kernel call (null for an empty view: an optional argument left
/// out). A view of the compute type is used in place; a 16-bit view asked for as float is
/// widened into fp32 scratch, and a mutable one is rounded back into the view when the stage
/// ends (after the kernel ran), so outputs, accumulated outputs and outputs that alias inputs
/// all behave as on fp32 tensors.
class fp32_stage {
 public:
  fp32_stage() = default;
  fp32_stage(const fp32_stage&) = delete;
  fp32_stage& operator=(const fp32_stage&) = delete;
  ~fp32_stage();

  template <class T>
  T* typed(const tensor::tensor_view& v) {
    if (!v.data) return nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (tensor::is_half_precision(v.type)) return widen(v, /*write_back=*/true, /*read=*/true);
    return v.host<T>().data();
  }
  /// An output whose first n elements the kernel overwrites without reading them: a 16-bit one
  /// is not widened first (its fp32 scratch starts undefined), and only those n are rounded back.
  template <class T>
  T* output(const tensor::tensor_view& v, std::int64_t n) {
    if (!v.data) return nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (tensor::is_half_precision(v.type))
        return widen({v.data, {n}, v.type, v.where}, /*write_back=*/true, /*read=*/false);
    return v.host<T>().data();
  }
  template <class T>
  const T* typed(const tensor::const_tensor_view& v) {
    if (!v.data) return nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (tensor::is_half_precision(v.type)) return widen(v, /*write_back=*/false, /*read=*/true);
    return v.host<T>().data();
  }

 private:
  float* widen(const tensor::const_tensor_view& v, bool write_back, bool read);

  struct staged {
    tensor::tensor_view target;  // null data: an input, nothing to write back
    float* values = nullptr;     // scratch from this thread's pool, of `capacity` floats
    std::size_t size = 0, capacity = 0;
  };
  std::vector<staged> staged_;
};

/// Throws tensor_error naming kernel and argument unless v holds at least n elements.
void need(const char* kernel, const char* argument, const tensor::const_tensor_view& v,
          std::int64_t n);
/// The same for an optional argument: an empty view passes.
void need_optional(const char* kernel, const char* argument, const tensor::const_tensor_view& v,
                   std::int64_t n);

}  // namespace mactor::kernels::detail
