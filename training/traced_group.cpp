// Each tensor-parallel collective inside a span, then handed to the real group.
#include "training/traced_group.hpp"

namespace mactor::training {

void traced_group::all_reduce_sum(float* data, std::size_t n) {
  const auto span = traced("tensor-parallel all-reduce", n * sizeof(float));
  inner_.all_reduce_sum(data, n);
}

void traced_group::all_reduce_sum(double* data, std::size_t n) {
  const auto span = traced("tensor-parallel all-reduce", n * sizeof(double));
  inner_.all_reduce_sum(data, n);
}

void traced_group::all_gather(const float* in, float* out, std::size_t n) {
  const auto span = traced("tensor-parallel all-gather", n * sizeof(float));
  inner_.all_gather(in, out, n);
}

void traced_group::all_gather(const double* in, double* out, std::size_t n) {
  const auto span = traced("tensor-parallel all-gather", n * sizeof(double));
  inner_.all_gather(in, out, n);
}

void traced_group::reduce_scatter_sum(const float* in, float* out, std::size_t n) {
  const auto span = traced("tensor-parallel reduce-scatter", n * inner_.size() * sizeof(float));
  inner_.reduce_scatter_sum(in, out, n);
}

void traced_group::reduce_scatter_sum(const double* in, double* out, std::size_t n) {
  const auto span = traced("tensor-parallel reduce-scatter", n * inner_.size() * sizeof(double));
  inner_.reduce_scatter_sum(in, out, n);
}

void traced_group::all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                                      std::span<const std::size_t> recv_bytes) {
  std::size_t bytes = 0;
  for (auto b : send_bytes) bytes += b;
  const auto span = traced("tensor-parallel all-to-all", bytes);
  inner_.all_to_all_v_bytes(in, send_bytes, out, recv_bytes);
}

}  // namespace mactor::training
