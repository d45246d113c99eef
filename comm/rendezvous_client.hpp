// A connection to the rendezvous store: set/get of opaque byte strings, blocking reads with a
// timeout, and the barrier and all-gather that ranks use to swap CAF node and UCX worker addresses.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/rendezvous_wire.hpp"

namespace mactor::comm {

class rendezvous_client {
 public:
  /// Connects, retrying until `connect_timeout` (the store may start after this rank).
  explicit rendezvous_client(host_port addr,
                             std::chrono::milliseconds connect_timeout = std::chrono::seconds(60));
  ~rendezvous_client();
  rendezvous_client(rendezvous_client&& other) noexcept;
  rendezvous_client& operator=(rendezvous_client&&) = delete;
  rendezvous_client(const rendezvous_client&) = delete;

  const host_port& address() const { return addr_; }

  void set(const std::string& key, const std::string& value);
  /// Waits until `key` exists; throws rendezvous_error naming the key after `timeout`.
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  /// Waits until every key exists; returns the keys still missing at `timeout` (empty: all there).
  std::vector<std::string> wait(const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout);
  /// Adds `delta` to the counter at `key` (absent counts as 0); returns the new value.
  int64_t add(const std::string& key, int64_t delta);

  /// Returns once all `world_size` ranks have called barrier(name) as often as this one.
  /// Throws rendezvous_error naming every rank that has not arrived when `timeout` passes.
  void barrier(const std::string& name, int rank, int world_size, std::chrono::milliseconds timeout);
  /// Every rank contributes `value`; returns all values in rank order. Same timeout rule.
  std::vector<std::string> all_gather(const std::string& name, int rank, int world_size,
                                      const std::string& value, std::chrono::milliseconds timeout);

 private:
  std::string call(const std::string& request);
  std::vector<std::string> rank_keys(const std::string& name, int world_size);
  void wait_for_ranks(const std::string& what, const std::vector<std::string>& keys,
                      std::chrono::milliseconds timeout);

  host_port addr_;
  int fd_ = -1;
  std::map<std::string, int> generation_;  // barrier/all_gather name -> times used so far
};

}  // namespace mactor::comm
