// NCCL communicator: unique id from member 0 via the bootstrap group, one stream per
// communicator, every call synchronous from the caller's point of view.
#include "comm/nccl_transport.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <source_location>
#include <string>

#include "comm/transport.hpp"

namespace mactor::comm {
namespace {

void check_cuda(cudaError_t e, const char* call,
                std::source_location where = std::source_location::current()) {
  if (e == cudaSuccess) return;
  throw comm_error(-1, std::string("CUDA call ") + call + " failed: " + cudaGetErrorString(e) +
                           " (" + where.file_name() + ":" + std::to_string(where.line()) + ")");
}

void check_nccl(ncclResult_t r, const char* call,
                std::source_location where = std::source_location::current()) {
  if (r == ncclSuccess) return;
  throw comm_error(-1, std::string("NCCL call ") + call + " failed: " + ncclGetErrorString(r) +
                           " (" + where.file_name() + ":" + std::to_string(where.line()) +
                           "); NCCL_DEBUG=WARN prints NCCL's reason");
}

}  // namespace

struct nccl_communicator::impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0;
  int size = 1;

  void sync() { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
};

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

nccl_communicator::nccl_communicator(communicator& bootstrap, int cuda_device)
    : impl_(std::make_unique<impl>()) {
  impl_->rank = bootstrap.rank();
  impl_->size = bootstrap.size();
  check_cuda(cudaSetDevice(cuda_device), "cudaSetDevice");
  ncclUniqueId id{};
  if (impl_->rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  bootstrap.broadcast_bytes(std::as_writable_bytes(std::span(&id, 1)), 0);
  check_nccl(ncclCommInitRank(&impl_->comm, impl_->size, id, impl_->rank), "ncclCommInitRank");
  check_cuda(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
}

nccl_communicator::~nccl_communicator() {
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

int nccl_communicator::rank() const { return impl_->rank; }
int nccl_communicator::size() const { return impl_->size; }

void nccl_communicator::all_reduce(std::span<float> data) {
  check_nccl(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum,
                           impl_->comm, impl_->stream),
             "ncclAllReduce");
  impl_->sync();
}

void nccl_communicator::all_reduce(std::span<double> data) {
  check_nccl(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat64, ncclSum,
                           impl_->comm, impl_->stream),
             "ncclAllReduce");
  impl_->sync();
}

void nccl_communicator::reduce_scatter(std::span<const float> in, std::span<float> out) {
  check_nccl(ncclReduceScatter(in.data(), out.data(), out.size(), ncclFloat32, ncclSum,
                               impl_->comm, impl_->stream),
             "ncclReduceScatter");
  impl_->sync();
}

void nccl_communicator::reduce_scatter(std::span<const double> in, std::span<double> out) {
  check_nccl(ncclReduceScatter(in.data(), out.data(), out.size(), ncclFloat64, ncclSum,
                               impl_->comm, impl_->stream),
             "ncclReduceScatter");
  impl_->sync();
}

void nccl_communicator::all_gather_bytes(std::span<const std::byte> in, std::span<std::byte> out) {
  check_nccl(ncclAllGather(in.data(), out.data(), in.size(), ncclChar, impl_->comm, impl_->stream),
             "ncclAllGather");
  impl_->sync();
}

void nccl_communicator::broadcast_bytes(std::span<std::byte> data, int root) {
  check_nccl(ncclBroadcast(data.data(), data.data(), data.size(), ncclChar, root, impl_->comm,
                           impl_->stream),
             "ncclBroadcast");
  impl_->sync();
}

// NCCL has no all-to-all primitive; grouped send/recv pairs are the documented pattern.
void nccl_communicator::all_to_all_bytes(std::span<const std::byte> in, std::span<std::byte> out) {
  const std::size_t block = in.size() / impl_->size;
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int p = 0; p < impl_->size; ++p) {
    check_nccl(ncclSend(in.data() + block * p, block, ncclChar, p, impl_->comm, impl_->stream),
               "ncclSend");
    check_nccl(ncclRecv(out.data() + block * p, block, ncclChar, p, impl_->comm, impl_->stream),
               "ncclRecv");
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  impl_->sync();
}

// Variable counts: the same grouped send/recv pairs at each member's offsets.
void nccl_communicator::all_to_all_v_bytes(std::span<const std::byte> in, std::span<const std::size_t> send_counts,
                                           std::span<std::byte> out, std::span<const std::size_t> recv_counts) {
  std::size_t send_at = 0, recv_at = 0;
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int p = 0; p < impl_->size; ++p) {
    check_nccl(ncclSend(in.data() + send_at, send_counts[p], ncclChar, p, impl_->comm, impl_->stream), "ncclSend");
    check_nccl(ncclRecv(out.data() + recv_at, recv_counts[p], ncclChar, p, impl_->comm, impl_->stream), "ncclRecv");
    send_at += send_counts[p], recv_at += recv_counts[p];
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  impl_->sync();
}

void nccl_communicator::barrier() {
  float* one = nullptr;
  check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&one), sizeof(float), impl_->stream),
             "cudaMallocAsync");
  check_nccl(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, impl_->comm, impl_->stream),
             "ncclAllReduce");
  check_cuda(cudaFreeAsync(one, impl_->stream), "cudaFreeAsync");
  impl_->sync();
}

void nccl_communicator::send_bytes(std::span<const std::byte> data, int peer) {
  check_nccl(ncclSend(data.data(), data.size(), ncclChar, peer, impl_->comm, impl_->stream),
             "ncclSend");
  impl_->sync();
}

void nccl_communicator::recv_bytes(std::span<std::byte> data, int peer) {
  check_nccl(ncclRecv(data.data(), data.size(), ncclChar, peer, impl_->comm, impl_->stream),
             "ncclRecv");
  impl_->sync();
}

}  // namespace mactor::comm
