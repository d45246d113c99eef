// The communicator's collectives on tensors: checked, then handed to the typed ones.
#include "comm/communicator.hpp"

#include <string>

#include "tensor/through_host.hpp"

namespace mactor::comm {
namespace {

void check_pair(const char* what, const tensor::const_tensor_view& in, const tensor::const_tensor_view& out) {
  if (in.type != out.type || in.where != out.where)
    throw tensor::tensor_error(std::string(what) + ": a " + std::string(tensor::short_name(in.type)) + " input and a " +
                               std::string(tensor::short_name(out.type)) + " output");
}

[[noreturn]] void unsupported(const char* what, tensor::dtype t) {
  throw tensor::tensor_error(std::string(what) + " of a " + std::string(tensor::short_name(t)) +
                             " tensor: the group reduces fp32 and fp64");
}

}  // namespace

std::unique_ptr<pending_exchange> communicator::start_exchange(std::span<const std::byte> out, int to,
                                                               std::span<std::byte> in, int from) {
  return exchange_on_thread([this, out, to, in, from] {
    std::vector<std::size_t> send(static_cast<std::size_t>(size()), 0), recv(send.size(), 0);
    send.at(static_cast<std::size_t>(to)) = out.size();
    recv.at(static_cast<std::size_t>(from)) = in.size();
    all_to_all_v_bytes(out, send, in, recv);
  });
}

void communicator::all_reduce(tensor::tensor_view data) {
  // The transports move host memory: a tensor on a device goes through a host copy (a device
  // transport, NCCL's, would take it as it is).
  if (data.where != tensor::cpu)
    return tensor::through_host(data, [this](tensor::tensor_view host) { all_reduce(host); });
  switch (data.type) {
    case tensor::dtype::float32: return all_reduce(data.host<float>());
    case tensor::dtype::float64: return all_reduce(data.host<double>());
    default: unsupported("all-reduce", data.type);
  }
}

void communicator::reduce_scatter(tensor::const_tensor_view in, tensor::tensor_view out) {
  check_pair("reduce-scatter", in, out);
  if (in.where != tensor::cpu)
    return tensor::through_host(in, out, false, [this](auto host_in, auto host_out) { reduce_scatter(host_in, host_out); });
  switch (in.type) {
    case tensor::dtype::float32: return reduce_scatter(in.host<float>(), out.host<float>());
    case tensor::dtype::float64: return reduce_scatter(in.host<double>(), out.host<double>());
    default: unsupported("reduce-scatter", in.type);
  }
}

void communicator::all_gather(tensor::const_tensor_view in, tensor::tensor_view out) {
  check_pair("all-gather", in, out);
  if (in.where != tensor::cpu)
    return tensor::through_host(in, out, false, [this](auto host_in, auto host_out) { all_gather(host_in, host_out); });
  all_gather_bytes({static_cast<const std::byte*>(in.data), in.nbytes()},
                   {static_cast<std::byte*>(out.data), out.nbytes()});
}

}  // namespace mactor::comm
