// The tensor collectives of a group: dtype and size checks, then the typed collective.
#include "model/group.hpp"

#include <string>

#include "kernels/dispatch.hpp"

namespace mactor::model {
namespace {

void check_sizes(const char* collective, std::int64_t in, std::int64_t out, std::int64_t expected_out) {
  if (out != expected_out)
    throw tensor::tensor_error(std::string("group::") + collective + ": " + std::to_string(in) +
                               " elements in, " + std::to_string(out) + " out, " +
                               std::to_string(expected_out) + " expected");
}

}  // namespace

void group::all_reduce_sum(tensor::tensor_view data) {
  kernels::dispatch_floating("group::all_reduce_sum", data.type, data.where, [&](auto zero) {
    using T = decltype(zero);
    auto elements = data.host<T>();
    all_reduce_sum(elements.data(), elements.size());
  });
}

void group::all_gather(tensor::const_tensor_view in, tensor::tensor_view out) {
  kernels::check_same_type("group::all_gather", {in, out});
  check_sizes("all_gather", in.numel(), out.numel(), in.numel() * size());
  kernels::dispatch_floating("group::all_gather", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    all_gather(in.host<T>().data(), out.host<T>().data(), std::size_t(in.numel()));
  });
}

void group::reduce_scatter_sum(tensor::const_tensor_view in, tensor::tensor_view out) {
  kernels::check_same_type("group::reduce_scatter_sum", {in, out});
  check_sizes("reduce_scatter_sum", in.numel(), out.numel() * size(), in.numel());
  kernels::dispatch_floating("group::reduce_scatter_sum", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    reduce_scatter_sum(in.host<T>().data(), out.host<T>().data(), std::size_t(out.numel()));
  });
}

}  // namespace mactor::model
