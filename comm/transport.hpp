// The data plane's abstract transport: asynchronous tagged byte messages between ranks.
// UCX, the in-process transport and any later one sit behind this interface; it includes neither
// UCX nor NCCL, so layers above comm/ compile without them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mactor::comm {

/// The outcome of one send or receive. `peer` is the other side's global rank.
struct status {
  bool ok = true;
  int peer = -1;
  std::size_t bytes = 0;  ///< bytes actually received (receives) or sent (sends)
  std::string message;    ///< empty when ok; otherwise names the rank and what went wrong
};

/// A transport or collective failure; `rank()` is the rank at fault (-1 when unknown).
class comm_error : public std::runtime_error {
 public:
  comm_error(int rank, const std::string& what) : std::runtime_error(what), rank_(rank) {}
  int rank() const noexcept { return rank_; }

 private:
  int rank_;
};

/// Called exactly once when an operation finishes, successfully or not. It may run on the
/// transport's progress thread, inline on the posting thread, or on a thread blocked in
/// wait_for: keep it short, non-blocking and thread-safe (an actor turns it into a message).
using completion = std::function<void(const status&)>;

/// Tags are at most max_tag (2^40 - 2; 2^40 - 1 is the transport's own shutdown barrier). The
/// transport adds the sender's rank itself, so a receive names the peer it expects and
/// messages from different peers never match each other.
inline constexpr int tag_bits = 40;
inline constexpr std::uint64_t max_tag = (std::uint64_t{1} << tag_bits) - 2;

/// Publishes this rank's opaque worker address and fetches a peer's. The launcher's key-value
/// store implements it in production; tests use the file-based one (comm/file_address_exchange).
class address_exchange {
 public:
  virtual ~address_exchange() = default;
  virtual void publish(int rank, const std::vector<std::byte>& address) = 0;
  /// Blocks until `rank` has published, or throws comm_error naming that rank after `timeout`.
  virtual std::vector<std::byte> fetch(int rank, std::chrono::milliseconds timeout) = 0;
};

/// Point-to-point tagged messaging among `world_size()` ranks. Sends and receives never block:
/// they post the operation and report through `done`. Messages between one pair of ranks with
/// the same tag match in the order they were posted.
class transport {
 public:
  virtual ~transport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  /// Sends `size` bytes at `data` to `peer`. The caller keeps the bytes alive and unchanged
  /// until `done` runs (large messages are read straight from that memory).
  virtual void send(int peer, std::uint64_t tag, const void* data, std::size_t size,
                    completion done) = 0;
  /// Receives up to `capacity` bytes from `peer` into `data`, which must stay alive until `done`.
  virtual void recv(int peer, std::uint64_t tag, void* data, std::size_t capacity,
                    completion done) = 0;

  /// Waits for every rank (a transport-level barrier on a reserved tag), then closes all
  /// connections. Call it once, on every rank, before destruction; destruction alone
  /// force-closes. Throws comm_error naming a rank that is gone.
  virtual void shutdown() = 0;

  /// Sends a buffer the transport owns until completion; `done` may be empty.
  void send_owned(int peer, std::uint64_t tag, std::vector<std::byte> bytes, completion done = {});

  /// Future-returning forms, for code that wants to block on a result (through wait_for: a
  /// transport may leave these to the waiting thread to drive).
  virtual std::future<status> send_future(int peer, std::uint64_t tag, const void* data,
                                          std::size_t size);
  virtual std::future<status> recv_future(int peer, std::uint64_t tag, void* data,
                                          std::size_t capacity);

  /// Waits up to `timeout` for a future from this transport; true when it is ready. The UCX
  /// transport drives the network from the waiting thread meanwhile (one wake-up per event
  /// instead of two), so blocking callers should wait through here rather than on `f`.
  virtual bool wait_for(std::future<status>& f, std::chrono::milliseconds timeout);
  /// wait_for without a deadline, then throws comm_error (naming the peer) on failure.
  void wait_ok(std::future<status>& f);

  /// Drives the network once from the calling thread, without blocking, unless another thread
  /// is driving it now: completions of posted operations may run here. A compute thread that
  /// overlaps a transfer calls it between pieces of its work, so the transfer moves on without
  /// a thread of its own (which, with every core computing, waits for one). Returns whether
  /// anything happened. The default does nothing: a transport that needs no driving.
  virtual bool progress() { return false; }

  /// Bytes of completed sends and receives on this rank: pipeline transfers and collectives
  /// alike (the inspector shows them). The UCX transport counts; others may leave them at 0.
  struct traffic_counters {
    std::atomic<std::int64_t> sent{0}, received{0};
  };
  const traffic_counters& traffic() const { return traffic_; }

 protected:
  traffic_counters traffic_;
};

/// Waits on a future from the transport and throws comm_error (naming the peer) on failure.
void wait_ok(std::future<status>& f);

}  // namespace mactor::comm
