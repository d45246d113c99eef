// In-process transport: a send waits in a queue until the matching receive arrives (or the
// other way round), then the bytes are copied once, outside the fabric's lock.
#include "comm/local_transport.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

namespace mactor::comm {
namespace {

struct pending_send {
  const void* data;
  std::size_t size;
  completion done;
};

struct pending_recv {
  void* data;
  std::size_t capacity;
  completion done;
};

using channel_key = std::tuple<int, int, std::uint64_t>;  // (source, destination, tag)

struct channel {
  std::deque<pending_send> sends;
  std::deque<pending_recv> recvs;
};

status failure(int peer, const std::string& what) {
  return status{false, peer, 0, what};
}

}  // namespace

struct local_fabric::impl {
  int world_size;
  std::mutex mu;
  std::map<channel_key, channel> channels;
  std::vector<bool> dead;
  std::condition_variable barrier_cv;
  int barrier_arrived = 0;
  long barrier_generation = 0;

  explicit impl(int n) : world_size(n), dead(n, false) {}

  // Copies a matched pair and reports both sides; called without the lock held.
  static void deliver(int src, int dst, pending_send s, pending_recv r) {
    if (s.size > r.capacity) {
      const std::string what = "message from rank " + std::to_string(src) + " to rank " +
                               std::to_string(dst) + " is " + std::to_string(s.size) +
                               " bytes but the receive buffer holds " +
                               std::to_string(r.capacity) + "; post a larger receive";
      s.done(failure(dst, what));
      r.done(failure(src, what));
      return;
    }
    if (s.size > 0) std::memcpy(r.data, s.data, s.size);
    s.done(status{true, dst, s.size, {}});
    r.done(status{true, src, s.size, {}});
  }

  std::string dead_message(int rank) const {
    return "rank " + std::to_string(rank) + " is gone (in-process transport marked it failed)";
  }
};

namespace {

class local_transport final : public transport {
 public:
  local_transport(local_fabric::impl& f, int rank) : f_(f), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return f_.world_size; }

  void send(int peer, std::uint64_t tag, const void* data, std::size_t size,
            completion done) override {
    check(peer, tag);
    std::unique_lock lock(f_.mu);
    if (f_.dead[peer] || f_.dead[rank_]) {
      const int who = f_.dead[peer] ? peer : rank_;
      lock.unlock();
      done(failure(who, f_.dead_message(who)));
      return;
    }
    channel& c = f_.channels[{rank_, peer, tag}];
    if (c.recvs.empty()) {
      c.sends.push_back({data, size, std::move(done)});
      return;
    }
    pending_recv r = std::move(c.recvs.front());
    c.recvs.pop_front();
    lock.unlock();
    local_fabric::impl::deliver(rank_, peer, {data, size, std::move(done)}, std::move(r));
  }

  void recv(int peer, std::uint64_t tag, void* data, std::size_t capacity,
            completion done) override {
    check(peer, tag);
    std::unique_lock lock(f_.mu);
    channel& c = f_.channels[{peer, rank_, tag}];
    // A message a rank sent before it died is still delivered, like a buffered network.
    if (c.sends.empty()) {
      if (f_.dead[peer] || f_.dead[rank_]) {
        const int who = f_.dead[peer] ? peer : rank_;
        lock.unlock();
        done(failure(who, f_.dead_message(who)));
        return;
      }
      c.recvs.push_back({data, capacity, std::move(done)});
      return;
    }
    pending_send s = std::move(c.sends.front());
    c.sends.pop_front();
    lock.unlock();
    local_fabric::impl::deliver(peer, rank_, std::move(s), {data, capacity, std::move(done)});
  }

  void shutdown() override {
    std::unique_lock lock(f_.mu);
    const long generation = f_.barrier_generation;
    if (++f_.barrier_arrived == f_.world_size) {
      f_.barrier_arrived = 0;
      ++f_.barrier_generation;
      f_.barrier_cv.notify_all();
      return;
    }
    f_.barrier_cv.wait(lock, [&] {
      for (int r = 0; r < f_.world_size; ++r)
        if (f_.dead[r]) return true;
      return f_.barrier_generation != generation;
    });
    for (int r = 0; r < f_.world_size; ++r)
      if (f_.dead[r] && f_.barrier_generation == generation)
        throw comm_error(r, "shutdown barrier: " + f_.dead_message(r));
  }

 private:
  void check(int peer, std::uint64_t tag) const {
    if (peer < 0 || peer >= f_.world_size)
      throw comm_error(peer, "peer rank " + std::to_string(peer) + " is outside the world of " +
                                 std::to_string(f_.world_size) + " ranks");
    if (tag > max_tag)
      throw comm_error(peer, "tag " + std::to_string(tag) + " exceeds the transport's 40 bits");
  }

  local_fabric::impl& f_;
  int rank_;
};

}  // namespace

local_fabric::local_fabric(int world_size) : impl_(std::make_unique<impl>(world_size)) {
  if (world_size < 1) throw comm_error(-1, "local_fabric needs at least one rank");
}

local_fabric::~local_fabric() = default;

std::unique_ptr<transport> local_fabric::connect(int rank) {
  if (rank < 0 || rank >= impl_->world_size)
    throw comm_error(rank, "local_fabric::connect: rank " + std::to_string(rank) +
                               " is outside the world of " + std::to_string(impl_->world_size));
  return std::make_unique<local_transport>(*impl_, rank);
}

void local_fabric::fail_rank(int rank) {
  std::vector<completion> to_fail;
  {
    std::lock_guard lock(impl_->mu);
    impl_->dead.at(rank) = true;
    for (auto& [key, c] : impl_->channels) {
      const auto [src, dst, tag] = key;
      if (src != rank && dst != rank) continue;
      // Sends by the dead rank stay deliverable; everything waiting on it fails.
      if (dst == rank)
        for (auto& s : c.sends) to_fail.push_back(std::move(s.done));
      if (dst == rank) c.sends.clear();
      for (auto& r : c.recvs) to_fail.push_back(std::move(r.done));
      c.recvs.clear();
    }
    impl_->barrier_cv.notify_all();
  }
  for (auto& done : to_fail) done(failure(rank, impl_->dead_message(rank)));
}

}  // namespace mactor::comm
