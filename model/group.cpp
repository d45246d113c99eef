// The tensor collectives of a group: dtype and size checks, then the typed collective.
#include "model/group.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/dispatch.hpp"
#include "tensor/through_host.hpp"

namespace mactor::model {
namespace {

// A collective's input and output sizes disagree: names both and the group's size.
[[noreturn]] void size_mismatch(const char* collective, std::int64_t in, std::int64_t out, int ranks) {
  throw tensor::tensor_error(std::string("group::") + collective + ": " + std::to_string(in) + " elements in, " +
                             std::to_string(out) + " out, over " + std::to_string(ranks) + " ranks");
}

// A 16-bit tensor goes through the collectives widened to fp32 (exact) and is rounded once at
// the end: a sum over ranks in fp32, as NCCL's bf16 reductions accumulate in fp32 per step.
tensor::tensor widened(tensor::const_tensor_view v) {
  tensor::tensor wide({v.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  kernels::convert(wide, v);
  return wide;
}

// out = collective(in) run on fp32 copies of the 16-bit in and out.
template <class Collective>
void through_fp32(tensor::const_tensor_view in, tensor::tensor_view out, Collective collective) {
  tensor::tensor wide_out({out.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  collective(widened(in).view(), wide_out.view());
  kernels::convert(out, wide_out);
}

// The collectives' transports move host memory: views on a device go through host copies
// (tensor/through_host.hpp; a group on NCCL would take them as they are). Both views of a
// collective must be on one device.
bool on_device(const char* collective, tensor::const_tensor_view in, tensor::const_tensor_view out) {
  if (in.where != out.where)
    throw tensor::tensor_error(std::string("group::") + collective + ": an input on " + tensor::to_string(in.where) +
                               " and an output on " + tensor::to_string(out.where));
  return in.where != tensor::cpu;
}

}  // namespace

void group::all_reduce_sum(tensor::tensor_view data) {
  if (on_device("all_reduce_sum", data, data))
    return tensor::through_host(data, [this](tensor::tensor_view host) { all_reduce_sum(host); });
  if (tensor::is_half_precision(data.type)) {
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

void group::all_reduce_max(float* data, std::size_t n) {
  if (size() == 1 || n == 0) return;
  std::vector<float> all(n * std::size_t(size()));
  all_gather(data, all.data(), n);
  for (int r = 0; r < size(); ++r)
    for (std::size_t i = 0; i < n; ++i) data[i] = std::fmax(data[i], all[std::size_t(r) * n + i]);
}

void group::all_gather(tensor::const_tensor_view in, tensor::tensor_view out) {
  kernels::check_same_type("group::all_gather", {in, out});
  if (out.numel() != in.numel() * size()) size_mismatch("all_gather", in.numel(), out.numel(), size());
  if (on_device("all_gather", in, out))
    return tensor::through_host(in, out, false, [this](auto host_in, auto host_out) { all_gather(host_in, host_out); });
  if (tensor::is_half_precision(out.type))
    return through_fp32(in, out, [this](auto wide_in, auto wide_out) { all_gather(wide_in, wide_out); });
  kernels::dispatch_floating("group::all_gather", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    all_gather(in.host<T>().data(), out.host<T>().data(), std::size_t(in.numel()));
  });
}

void group::reduce_scatter_sum(tensor::const_tensor_view in, tensor::tensor_view out) {
  kernels::check_same_type("group::reduce_scatter_sum", {in, out});
  if (in.numel() != out.numel() * size()) size_mismatch("reduce_scatter_sum", in.numel(), out.numel(), size());
  if (on_device("reduce_scatter_sum", in, out))
    return tensor::through_host(in, out, false,
                                [this](auto host_in, auto host_out) { reduce_scatter_sum(host_in, host_out); });
  if (tensor::is_half_precision(out.type))
    return through_fp32(in, out, [this](auto wide_in, auto wide_out) { reduce_scatter_sum(wide_in, wide_out); });
  kernels::dispatch_floating("group::reduce_scatter_sum", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    reduce_scatter_sum(in.host<T>().data(), out.host<T>().data(), std::size_t(out.numel()));
  });
}

void group::all_to_all_v(tensor::const_tensor_view in, const std::vector<std::int64_t>& send_rows,
                         tensor::tensor_view out, const std::vector<std::int64_t>& recv_rows, std::int64_t width) {
  kernels::check_same_type("group::all_to_all_v", {in, out});
  const auto n = static_cast<std::size_t>(size());
  if (send_rows.size() != n || recv_rows.size() != n)
    throw tensor::tensor_error("group::all_to_all_v: " + std::to_string(send_rows.size()) + " send and " +
                               std::to_string(recv_rows.size()) + " receive counts for " + std::to_string(n) + " ranks");
  std::int64_t sent = 0, received = 0;
  for (std::size_t q = 0; q < n; ++q) sent += send_rows[q], received += recv_rows[q];
  if (sent * width > in.numel() || received * width > out.numel())
    size_mismatch("all_to_all_v", sent * width, received * width, size());
  if (on_device("all_to_all_v", in, out))  // the rows past those received stay as they were
    return tensor::through_host(in, out, true, [&](auto host_in, auto host_out) {
      all_to_all_v(host_in, send_rows, host_out, recv_rows, width);
    });
  const std::size_t row_bytes = static_cast<std::size_t>(width) * tensor::size_of(in.type);
  std::vector<std::size_t> send_bytes(n), recv_bytes(n);
  for (std::size_t q = 0; q < n; ++q)
    send_bytes[q] = static_cast<std::size_t>(send_rows[q]) * row_bytes,
    recv_bytes[q] = static_cast<std::size_t>(recv_rows[q]) * row_bytes;
  all_to_all_v_bytes(static_cast<const std::byte*>(in.data), send_bytes, static_cast<std::byte*>(out.data), recv_bytes);
}

void group::all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                               std::span<const std::size_t> recv_bytes) {
  if (size() != 1) throw std::logic_error("group::all_to_all_v_bytes: this group has no all-to-all");
  if (send_bytes[0] != recv_bytes[0]) size_mismatch("all_to_all_v", std::int64_t(send_bytes[0]), std::int64_t(recv_bytes[0]), 1);
  if (send_bytes[0] > 0) std::memcpy(out, in, send_bytes[0]);
}

std::unique_ptr<pending_shift> group::start_ring_shift(const std::byte* send, std::byte* recv, std::size_t n, int step,
                                                       std::string what) {
  const int from = ((rank() - step) % size() + size()) % size();
  return comm::exchange_on_thread([this, send, recv, n, step, from, what = std::move(what)] {
    labelled(what, from, [&] { ring_shift_bytes(send, recv, n, step); });
  });
}

void group::ring_shift_bytes(const std::byte* send, std::byte* recv, std::size_t n, int step) {
  const int ranks = size();
  const auto at = [&](int k) { return static_cast<std::size_t>(((rank() + k) % ranks + ranks) % ranks); };
  std::vector<std::size_t> send_bytes(static_cast<std::size_t>(ranks), 0), recv_bytes(send_bytes.size(), 0);
  send_bytes[at(step)] = n;
  recv_bytes[at(-step)] = n;
  all_to_all_v_bytes(send, send_bytes, recv, recv_bytes);
}

}  // namespace mactor::model
