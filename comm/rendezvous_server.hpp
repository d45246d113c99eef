// The rendezvous key-value store: a small TCP server (one thread per connection) holding byte
// strings by key, with blocking reads, so ranks can exchange addresses before any transport exists.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mactor::comm {

class rendezvous_server {
 public:
  /// Listens on all interfaces at `port` (0: a free port). Throws rendezvous_error on failure.
  explicit rendezvous_server(int port = 0);
  ~rendezvous_server();
  rendezvous_server(const rendezvous_server&) = delete;
  rendezvous_server& operator=(const rendezvous_server&) = delete;

  int port() const { return port_; }

  /// Sets a key from inside the hosting process (mactor uses it to post "mactor/abort").
  void set(const std::string& key, std::string value);
  std::optional<std::string> try_get(const std::string& key) const;

  /// Waits until no client is connected (or `timeout` passes); true when none is.
  bool wait_until_idle(std::chrono::milliseconds timeout);

  /// Closes the listener and every connection; blocked clients see the connection drop.
  void stop();

 private:
  void accept_loop();
  void serve(int fd);
  std::string handle(const std::string& request);

  int port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  bool stopping_ = false;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace mactor::comm
