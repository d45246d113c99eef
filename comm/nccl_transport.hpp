// NCCL behind the communicator interface, for groups whose members each own one GPU.
// Built only with CUDA; nccl.h stays in the .cpp.
#pragma once

#include <memory>

#include "comm/communicator.hpp"

namespace mactor::comm {

/// Collectives on device memory. The NCCL unique id travels over `bootstrap`, a communicator
/// over the same members (the ring one on a transport). Each call is enqueued on this
/// communicator's CUDA stream and waited for before returning.
class nccl_communicator final : public communicator {
 public:
  nccl_communicator(communicator& bootstrap, int cuda_device);
  ~nccl_communicator() override;

  int rank() const override;
  int size() const override;
  void all_reduce(std::span<float> data) override;
  void all_reduce(std::span<double> data) override;
  void reduce_scatter(std::span<const float> in, std::span<float> out) override;
  void reduce_scatter(std::span<const double> in, std::span<double> out) override;
  void all_gather_bytes(std::span<const std::byte> in, std::span<std::byte> out) override;
  void broadcast_bytes(std::span<std::byte> data, int root) override;
  void all_to_all_bytes(std::span<const std::byte> in, std::span<std::byte> out) override;
  void all_to_all_v_bytes(std::span<const std::byte> in, std::span<const std::size_t> send_counts,
                          std::span<std::byte> out, std::span<const std::size_t> recv_counts) override;
  void barrier() override;
  void send_bytes(std::span<const std::byte> data, int peer) override;
  void recv_bytes(std::span<std::byte> data, int peer) override;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

/// Number of usable CUDA devices; 0 when the driver or runtime reports any error.
int cuda_device_count();

}  // namespace mactor::comm
