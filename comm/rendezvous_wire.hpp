// The rendezvous store's wire format and the TCP plumbing under it: length-prefixed frames of
// length-prefixed fields, so keys and values are opaque byte strings.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mactor::comm {

/// A rendezvous failure: unreachable store, lost connection, or a peer that never arrived.
struct rendezvous_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Requests the store answers.
enum class rdzv_op : uint8_t { set = 1, get = 2, wait = 3, add = 4 };
/// Reply status: ok, or timeout (the payload then lists the missing keys).
enum class rdzv_status : uint8_t { ok = 0, timeout = 1, bad_request = 2 };

/// "host:port" split; throws rendezvous_error naming the text when it has no valid port.
struct host_port {
  std::string host;
  int port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};
host_port parse_host_port(const std::string& text);

/// Appends fields to a frame body.
class wire_writer {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u64(uint64_t v);
  void bytes(std::string_view s);
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

/// Reads fields back; throws rendezvous_error when the frame is shorter than its fields claim.
class wire_reader {
 public:
  explicit wire_reader(std::string_view data) : data_(data) {}
  uint8_t u8();
  uint64_t u64();
  std::string bytes();
  bool done() const { return pos_ == data_.size(); }

 private:
  void need(size_t n) const;
  std::string_view data_;
  size_t pos_ = 0;
};

/// Sends one frame (4-byte big-endian length, then the body). Throws on a broken connection.
void send_frame(int fd, std::string_view body);
/// Receives one frame; returns false on a clean end of stream before any byte of it.
bool recv_frame(int fd, std::string& body);

/// Connects to host:port, retrying refused connections until `timeout` passes (the store may
/// still be starting). Throws rendezvous_error naming the address when it never answers.
int connect_with_retry(const host_port& addr, std::chrono::milliseconds timeout);

/// Listens on all interfaces at `port` (0: any free port); returns the socket, sets `port`.
int listen_tcp(int& port);

}  // namespace mactor::comm
