// Row gathers, scatter-adds, row scaling and row dots behind the MoE token dispatch.
#include "kernels/moe_permute.hpp"

#include <cstring>

#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

namespace mactor::kernels {

void gather_rows(tensor::tensor_view out, tensor::const_tensor_view in,
                 std::span<const std::int64_t> rows, int w) {
  check_same_type("gather_rows", {out, in});
  const std::int64_t n = std::int64_t(rows.size());
  detail::need("gather_rows", "out", out, n * w);
  for (auto r : rows)
    if (r < 0 || (r + 1) * w > in.numel())
      throw tensor::tensor_error("kernel gather_rows: row " + std::to_string(r) + " is outside in " +
                                 tensor::to_string(in.shape));
  if (on_device(out)) return device_kernels_for("gather_rows", out).gather_rows(out, in, rows, w);
  const std::size_t row_bytes = std::size_t(w) * tensor::size_of(in.type);
  const auto* src = static_cast<const char*>(in.data);
  auto* dst = static_cast<char*>(out.data);
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + i * row_bytes, src + rows[i] * row_bytes, row_bytes);
}

void scatter_add_rows(tensor::tensor_view out, tensor::const_tensor_view in,
                      std::span<const std::int64_t> rows, int w) {
  check_compatible("scatter_add_rows", {out, in});
  const std::int64_t n = std::int64_t(rows.size());
  detail::need("scatter_add_rows", "in", in, n * w);
  for (auto r : rows)
    if (r < 0 || (r + 1) * w > out.numel())
      throw tensor::tensor_error("kernel scatter_add_rows: row " + std::to_string(r) +
                                 " is outside out " + tensor::to_string(out.shape));
  if (on_device(out)) return device_kernels_for("scatter_add_rows", out).scatter_add_rows(out, in, rows, w);
  detail::fp32_stage stage;
  dispatch_compute("scatter_add_rows", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    T* o = stage.typed<T>(out);
    const T* x = stage.typed<T>(in);
    for (std::int64_t i = 0; i < n; ++i) {
      T* oi = o + rows[i] * w;
      const T* xi = x + i * w;
      for (int j = 0; j < w; ++j) oi[j] += xi[j];
    }
  });
}

void scale_rows(tensor::tensor_view out, tensor::const_tensor_view in,
                tensor::const_tensor_view scale, std::int64_t n, int w) {
  check_compatible("scale_rows", {out, in, scale});
  detail::need("scale_rows", "out", out, n * w);
  detail::need("scale_rows", "in", in, n * w);
  detail::need("scale_rows", "scale", scale, n);
  if (on_device(out)) return device_kernels_for("scale_rows", out).scale_rows(out, in, scale, n, w);
  detail::fp32_stage stage;
  dispatch_compute("scale_rows", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    T* o = stage.typed<T>(out);
    const T* x = out.data == in.data ? o : stage.typed<T>(in);
    const T* s = stage.typed<T>(scale);
#pragma omp parallel for schedule(static) if (n * w > 32768)
    for (std::int64_t i = 0; i < n; ++i)
      for (int j = 0; j < w; ++j) o[i * w + j] = x[i * w + j] * s[i];
  });
}

void row_dots(tensor::tensor_view out, tensor::const_tensor_view a, tensor::const_tensor_view b,
              std::int64_t n, int w) {
  check_compatible("row_dots", {out, a, b});
  detail::need("row_dots", "out", out, n);
  detail::need("row_dots", "a", a, n * w);
  detail::need("row_dots", "b", b, n * w);
  if (on_device(out)) return device_kernels_for("row_dots", out).row_dots(out, a, b, n, w);
  detail::fp32_stage stage;
  dispatch_compute("row_dots", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    T* o = stage.output<T>(out, n);
    const T* x = stage.typed<T>(a);
    const T* y = stage.typed<T>(b);
#pragma omp parallel for schedule(static) if (n * w > 32768)
    for (std::int64_t i = 0; i < n; ++i) {
      T sum = 0;
      for (int j = 0; j < w; ++j) sum += x[i * w + j] * y[i * w + j];
      o[i] = sum;
    }
  });
}

}  // namespace mactor::kernels
