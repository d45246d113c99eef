// The tensor collectives of a group: dtype and size checks, then the typed collective.
#include "model/group.hpp"

#include <string>

#include "kernels/convert.hpp"
#include "kernels/dispatch.hpp"

namespace mactor::model {
namespace {

void check_sizes(const char* collective, std::int64_t in, std::int64_t out, std::int64_t expected_out) {
  if (out != expected_out)
    throw tensor::tensor_error(std::string("group::") + collective + ": " + std::to_string(in) +
                               " elements in, " + std::to_string(out) + " out, " +
                               std::to_string(expected_out) + " expected");
}

// A 16-bit tensor goes through the collectives widened to fp32 (exact) and is rounded once at
// the end: a sum over ranks in fp32, as NCCL's bf16 reductions accumulate in fp32 per step.
bool is_half(tensor::dtype t) { return t == tensor::dtype::bfloat16 || t == tensor::dtype::float16; }

tensor::tensor widened(tensor::const_tensor_view v) {
  tensor::tensor wide({v.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  kernels::convert(wide, v);
  return wide;
}

tensor::tensor wide_like(tensor::const_tensor_view v) {
  return tensor::tensor({v.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
}

}  // namespace

void group::all_reduce_sum(tensor::tensor_view data) {
  if (is_half(data.type)) {
    auto wide = widened(data);
    all_reduce_sum(wide.view());
    kernels::convert(data, wide);
    return;
  }
  kernels::dispatch_floating("group::all_reduce_sum", data.type, data.where, [&](auto zero) {
    using T = decltype(zero);
    auto elements = data.host<T>();
    all_reduce_sum(elements.data(), elements.size());
  });
}

void group::all_gather(tensor::const_tensor_view in, tensor::tensor_view out) {
  kernels::check_same_type("group::all_gather", {in, out});
  check_sizes("all_gather", in.numel(), out.numel(), in.numel() * size());
  if (is_half(out.type)) {
    auto wide_out = wide_like(out);
    all_gather(widened(in), wide_out);
    kernels::convert(out, wide_out);
    return;
  }
  kernels::dispatch_floating("group::all_gather", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    all_gather(in.host<T>().data(), out.host<T>().data(), std::size_t(in.numel()));
  });
}

void group::reduce_scatter_sum(tensor::const_tensor_view in, tensor::tensor_view out) {
  kernels::check_same_type("group::reduce_scatter_sum", {in, out});
  check_sizes("reduce_scatter_sum", in.numel(), out.numel() * size(), in.numel());
  if (is_half(out.type)) {
    auto wide_out = wide_like(out);
    reduce_scatter_sum(widened(in), wide_out);
    kernels::convert(out, wide_out);
    return;
  }
  kernels::dispatch_floating("group::reduce_scatter_sum", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    reduce_scatter_sum(in.host<T>().data(), out.host<T>().data(), std::size_t(out.numel()));
  });
}

}  // namespace mactor::model
