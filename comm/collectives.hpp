// Collectives on top of any transport: ring all-reduce (reduce-scatter then all-gather),
// ring reduce-scatter and all-gather, linear broadcast and all-to-all, dissemination barrier.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "tensor/host_buffer.hpp"
#include "comm/transport.hpp"

namespace mactor::comm {

/// Collective tags use bit 39, a 17-bit group id and a 22-bit sequence number (the transport
/// carries 40 bits). Point-to-point users of the same transport keep their own tags below 2^39.
inline constexpr std::uint64_t collective_tag_bit = std::uint64_t{1} << 39;

/// How long one step of a collective may wait on a peer that is alive but silent (a hung
/// rank, or members calling different collectives) before it fails naming that peer.
/// Dead peers are reported by the transport much sooner.
inline constexpr std::chrono::milliseconds default_collective_timeout{300'000};

/// A group of global ranks on one transport. Every member constructs it with the same member
/// list (in the same order) and the same `group_id`; two groups that share members need
/// different ids (comm/process_groups.hpp hands them out). After a timeout the communicator
/// and the buffers of the failed call must not be used again: treat it as fatal, as NCCL does.
class transport_communicator final : public communicator {
 public:
  transport_communicator(transport& t, std::vector<int> members, std::uint32_t group_id,
                         std::chrono::milliseconds timeout = default_collective_timeout);

  int rank() const override { return position_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::vector<int>& members() const { return members_; }

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
  /// Posts both halves on the transport; test() drives it from the calling thread
  /// (transport::progress), so no thread of its own is needed (transport_exchange.cpp).
  std::unique_ptr<pending_exchange> start_exchange(std::span<const std::byte> out, int to, std::span<std::byte> in,
                                                   int from) override;

 private:
  class exchange_in_flight;
  template <class T>
  void all_reduce_impl(std::span<T> data);
  template <class T>
  void reduce_scatter_impl(std::span<const T> in, std::span<T> out);
  template <class T>
  void ring_reduce_scatter(T* data, const std::vector<std::size_t>& bounds, int offset,
                           std::uint64_t tag);
  void ring_all_gather(std::byte* data, const std::vector<std::size_t>& bounds, int offset,
                       std::uint64_t tag);
  /// Posts a receive from `from` and a send to `to` (group positions), then waits for both.
  void exchange(int to, const void* send_data, std::size_t send_size, int from, void* recv_data,
                std::size_t recv_size, std::uint64_t tag);
  /// Waits for one operation with the group's timeout; throws comm_error naming the peer.
  void wait(std::future<status>& f, int peer_position, const char* what);
  [[noreturn]] void fail_timeout(int peer_position, const char* what) const;
  /// Checks a finished receive: ok, and of exactly `expected` bytes (else the members called
  /// mismatched collectives).
  static void check_received(const status& got, std::size_t expected);
  std::uint64_t next_tag();
  int next() const { return (position_ + 1) % size(); }
  int prev() const { return (position_ + size() - 1) % size(); }

  transport& transport_;
  std::vector<int> members_;
  int position_ = -1;  // this rank's index in members_, the group rank
  std::uint32_t group_id_;
  std::chrono::milliseconds timeout_;
  std::uint32_t seq_ = 0;
  tensor::host_vector<std::byte> scratch_;  // reduce-scatter's incoming chunk (huge pages: tensor/host_buffer.hpp)
};

}  // namespace mactor::comm
