// A communicator that says what it is doing: the collective in progress (which group, which
// operation, how many bytes, since when, on which thread), for the inspector and the stall
// report. It forwards every call to the communicator it wraps; the bookkeeping is one short lock
// on entry and one on exit, so it suits the tensor-parallel collectives inside a layer too.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace mactor::comm {

/// Marks the calling thread as a background collective thread (training/comm_worker): its calls
/// are reported as `background`, so the training thread's activity is not taken for them.
void mark_background_thread();
/// Whether the calling thread was so marked.
bool on_background_thread();

/// While alive, the calling thread's calls on a watched communicator say what they are for
/// instead of the bare operation: `what` with "{peer}" standing for member `peer` of the group,
/// by global rank ("KV block 2 of 3 from {peer} in ring attention" reads "... from rank 4 ...").
class call_label {
 public:
  call_label(std::string what, int peer);
  ~call_label();
  call_label(const call_label&) = delete;
  call_label& operator=(const call_label&) = delete;

 private:
  const call_label* outer_;
  friend class watched_communicator;
  std::string what_;
  int peer_;
};

class watched_communicator final : public communicator {
 public:
  using clock = std::chrono::steady_clock;
  /// `name` names the group ("data-parallel"); `members` are its global ranks, `me` this rank.
  watched_communicator(std::unique_ptr<communicator> inner, std::string name, std::vector<int> members, int me);

  /// The collective in progress, if any.
  struct call {
    std::string what;  ///< "data-parallel all-reduce of 1.5 MiB with rank 1"
    clock::time_point since;
    bool background = false;
  };
  std::optional<call> current() const;
  const std::string& name() const { return name_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
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
  /// The inner communicator's exchange; it shows as the call in progress while the caller
  /// waits for it (not while the caller computes with it in flight).
  std::unique_ptr<pending_exchange> start_exchange(std::span<const std::byte> out, int to, std::span<std::byte> in,
                                                   int from) override;

 private:
  class scope;
  class watched_exchange;
  std::unique_ptr<communicator> inner_;
  std::string name_;
  std::string others_;  // "rank 1" / "ranks 1, 2, 3"
  std::vector<int> members_;
  mutable std::mutex mu_;
  const char* op_ = nullptr;  // null: idle
  std::size_t bytes_ = 0;
  int peer_ = -1;  // send_bytes / recv_bytes: the member talked to
  std::string label_;  // the calling thread's call_label, if any
  int label_peer_ = -1;
  clock::time_point since_;
  bool background_ = false;
};

/// "1.5 MiB", "640 B": how the watch writes sizes.
std::string format_size(std::size_t bytes);

}  // namespace mactor::comm
