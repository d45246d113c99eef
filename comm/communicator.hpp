// The collective interface over one process group: the ring implementation on a transport
// (comm/collectives.hpp) and NCCL (comm/nccl_transport.hpp) both implement it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::comm {

/// An exchange communicator::start_exchange posted. test() moves it along from the calling
/// thread without blocking and says whether both halves are done; wait() returns once they are,
/// throwing comm_error (naming the peer) on a failure or the group's timeout. Destroying one
/// that was not waited for waits for it first (its buffers are in use until then), ignoring
/// failures.
class pending_exchange {
 public:
  virtual ~pending_exchange() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

/// `work` (a blocking exchange) run on a thread of its own, as a pending exchange: test() says
/// whether it has finished, wait() rethrows what it threw. communicator::start_exchange's default
/// and model::group::start_ring_shift's run so (header-only: model/ uses it without linking comm).
class threaded_exchange final : public pending_exchange {
 public:
  explicit threaded_exchange(std::function<void()> work) : done_(std::async(std::launch::async, std::move(work))) {}
  ~threaded_exchange() override {
    if (done_.valid()) done_.wait();
  }
  bool test() override { return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  void wait() override { done_.get(); }

 private:
  std::future<void> done_;
};
inline std::unique_ptr<pending_exchange> exchange_on_thread(std::function<void()> work) {
  return std::make_unique<threaded_exchange>(std::move(work));
}

/// Blocking collectives over the members of one group, called by every member in the same
/// order. Reductions are sums. Results are bitwise identical on every member. A failure throws
/// comm_error naming the global rank at fault. Spans point to host memory for the ring
/// implementation and to device memory for NCCL.
class communicator {
 public:
  virtual ~communicator() = default;
  /// This process's position in the group (0 .. size()-1).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void all_reduce(std::span<float> data) = 0;
  virtual void all_reduce(std::span<double> data) = 0;
  /// in: size() blocks of out.size(); member i receives the sum of everyone's block i.
  virtual void reduce_scatter(std::span<const float> in, std::span<float> out) = 0;
  virtual void reduce_scatter(std::span<const double> in, std::span<double> out) = 0;
  /// out: size() blocks of in.size(); block i is member i's input.
  virtual void all_gather_bytes(std::span<const std::byte> in, std::span<std::byte> out) = 0;
  /// Copies `root`'s data (root is a group position) to every member.
  virtual void broadcast_bytes(std::span<std::byte> data, int root) = 0;
  /// in and out: size() equal blocks; out block j is member j's in block rank().
  virtual void all_to_all_bytes(std::span<const std::byte> in, std::span<std::byte> out) = 0;
  /// Variable-size all-to-all (MoE's token dispatch): in holds send_counts[j] bytes for member j
  /// and out receives recv_counts[j] bytes from member j, both as blocks in member order.
  /// Member j's send_counts[rank()] must equal this member's recv_counts[j] (exchange the counts
  /// first with all_to_all); a mismatch throws comm_error naming the member.
  virtual void all_to_all_v_bytes(std::span<const std::byte> in, std::span<const std::size_t> send_counts,
                                  std::span<std::byte> out, std::span<const std::size_t> recv_counts) = 0;
  virtual void barrier() = 0;
  /// Sends `out` to member `to` and receives exactly in.size() bytes from member `from`, and
  /// returns at once: the caller computes meanwhile and calls test() between pieces of work (a
  /// ring step of context parallelism). It counts as a collective: every member calls it in
  /// the same order as the others. The buffers stay in use until the exchange is done. The
  /// default runs an all_to_all_v_bytes with one non-empty block each way on a thread.
  virtual std::unique_ptr<pending_exchange> start_exchange(std::span<const std::byte> out, int to,
                                                           std::span<std::byte> in, int from);
  /// Pipeline point-to-point, blocking; `peer` is a group position.
  virtual void send_bytes(std::span<const std::byte> data, int peer) = 0;
  virtual void recv_bytes(std::span<std::byte> data, int peer) = 0;

  /// The collectives on tensors of any dtype the group can reduce (fp32, fp64 today); throws
  /// tensor::tensor_error for another dtype or a mismatch. Tensors on a device go through host
  /// copies (the transports move host memory).
  void all_reduce(tensor::tensor_view data);
  void reduce_scatter(tensor::const_tensor_view in, tensor::tensor_view out);
  void all_gather(tensor::const_tensor_view in, tensor::tensor_view out);

  template <class T>
  void all_gather(std::span<const T> in, std::span<T> out) {
    all_gather_bytes(std::as_bytes(in), std::as_writable_bytes(out));
  }
  template <class T>
  void broadcast(std::span<T> data, int root) {
    broadcast_bytes(std::as_writable_bytes(data), root);
  }
  template <class T>
  void all_to_all(std::span<const T> in, std::span<T> out) {
    all_to_all_bytes(std::as_bytes(in), std::as_writable_bytes(out));
  }
  /// all_to_all_v_bytes with counts in elements of T.
  template <class T>
  void all_to_all_v(std::span<const T> in, std::span<const std::size_t> send_counts, std::span<T> out,
                    std::span<const std::size_t> recv_counts) {
    std::vector<std::size_t> send_bytes(send_counts.begin(), send_counts.end());
    std::vector<std::size_t> recv_bytes(recv_counts.begin(), recv_counts.end());
    for (auto& b : send_bytes) b *= sizeof(T);
    for (auto& b : recv_bytes) b *= sizeof(T);
    all_to_all_v_bytes(std::as_bytes(in), send_bytes, std::as_writable_bytes(out), recv_bytes);
  }
  template <class T>
  void send(std::span<const T> data, int peer) {
    send_bytes(std::as_bytes(data), peer);
  }
  template <class T>
  void recv(std::span<T> data, int peer) {
    recv_bytes(std::as_writable_bytes(data), peer);
  }
};

}  // namespace mactor::comm
