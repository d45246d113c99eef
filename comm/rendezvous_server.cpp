// The rendezvous store's server: accept loop, per-connection request loop, blocking get and wait.
#include "comm/rendezvous_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "comm/rendezvous_wire.hpp"

namespace mactor::comm {

rendezvous_server::rendezvous_server(int port) : port_(port) {
  listen_fd_ = listen_tcp(port_);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw rendezvous_error("rendezvous store: cannot create its wake-up pipe");
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

rendezvous_server::~rendezvous_server() { stop(); }

void rendezvous_server::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  changed_.notify_all();
  char c = 0;
  [[maybe_unused]] auto w = ::write(wake_pipe_[1], &c, 1);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void rendezvous_server::set(const std::string& key, std::string value) {
  {
    std::lock_guard lock(mu_);
    data_[key] = std::move(value);
  }
  changed_.notify_all();
}

std::optional<std::string> rendezvous_server::try_get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

void rendezvous_server::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    conn_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void rendezvous_server::serve(int fd) {
  try {
    std::string request;
    while (recv_frame(fd, request)) send_frame(fd, handle(request));
  } catch (const std::exception&) {
    // A client that vanishes mid-request is its own problem; the store carries on.
  }
  {
    std::lock_guard lock(mu_);
    conn_fds_.erase(std::remove(conn_fds_.begin(), conn_fds_.end(), fd), conn_fds_.end());
    ::close(fd);
  }
  changed_.notify_all();
}

bool rendezvous_server::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return conn_fds_.empty(); });
}

std::string rendezvous_server::handle(const std::string& request) {
  wire_reader in(request);
  wire_writer out;
  auto op = static_cast<rdzv_op>(in.u8());
  std::unique_lock lock(mu_);
  switch (op) {
    case rdzv_op::set: {
      std::string key = in.bytes();
      data_[key] = in.bytes();
      changed_.notify_all();
      out.u8(static_cast<uint8_t>(rdzv_status::ok));
      break;
    }
    case rdzv_op::add: {
      std::string key = in.bytes();
      int64_t delta = static_cast<int64_t>(in.u64());
      auto& slot = data_[key];
      char* end = nullptr;
      int64_t value = std::strtoll(slot.c_str(), &end, 10) + delta;
      if (*end != '\0') {  // the key holds bytes that are not a counter
        out.u8(static_cast<uint8_t>(rdzv_status::bad_request));
        break;
      }
      slot = std::to_string(value);
      changed_.notify_all();
      out.u8(static_cast<uint8_t>(rdzv_status::ok));
      out.u64(static_cast<uint64_t>(value));
      break;
    }
    case rdzv_op::get:
    case rdzv_op::wait: {
      // get: one key, answered with its value; wait: many keys, answered with those missing.
      std::vector<std::string> keys;
      uint64_t n = op == rdzv_op::get ? 1 : in.u64();
      for (uint64_t i = 0; i < n; ++i) keys.push_back(in.bytes());
      // Clamped so a "forever" timeout cannot overflow the clock.
      uint64_t wait_ms = std::min<uint64_t>(in.u64(), uint64_t{30} * 24 * 3600 * 1000);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
      auto missing = [&] {
        std::vector<std::string> m;
        for (auto& k : keys)
          if (!data_.count(k)) m.push_back(k);
        return m;
      };
      changed_.wait_until(lock, deadline, [&] { return stopping_ || missing().empty(); });
      auto left = missing();
      out.u8(static_cast<uint8_t>(left.empty() ? rdzv_status::ok : rdzv_status::timeout));
      if (op == rdzv_op::get) {
        out.bytes(left.empty() ? data_[keys[0]] : std::string());
      } else {
        out.u64(left.size());
        for (auto& k : left) out.bytes(k);
      }
      break;
    }
    default:
      out.u8(static_cast<uint8_t>(rdzv_status::bad_request));
  }
  return out.data();
}

}  // namespace mactor::comm
