// TCP framing and connection set-up for the rendezvous store.
#include "comm/rendezvous_wire.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace mactor::comm {

host_port parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  host_port hp;
  if (colon != std::string::npos && colon > 0) {
    hp.host = text.substr(0, colon);
    char* end = nullptr;
    long p = std::strtol(text.c_str() + colon + 1, &end, 10);
    if (*end == '\0' && colon + 1 < text.size() && p > 0 && p < 65536) hp.port = static_cast<int>(p);
  }
  if (hp.port == 0)
    throw rendezvous_error("rendezvous address '" + text +
                           "' is not host:port (e.g. 10.0.0.1:29500); fix MACTOR_RDZV_ADDR or "
                           "MASTER_ADDR/MASTER_PORT");
  if (hp.host.size() > 2 && hp.host.front() == '[' && hp.host.back() == ']')
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  return hp;
}

void wire_writer::u64(uint64_t v) {
  for (int i = 7; i >= 0; --i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void wire_writer::bytes(std::string_view s) {
  u64(s.size());
  buf_.append(s);
}

void wire_reader::need(size_t n) const {
  if (data_.size() - pos_ < n) throw rendezvous_error("rendezvous: truncated message");
}

uint8_t wire_reader::u8() {
  need(1);
  return static_cast<uint8_t>(data_[pos_++]);
}

uint64_t wire_reader::u64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(data_[pos_++]);
  return v;
}

std::string wire_reader::bytes() {
  uint64_t n = u64();
  need(n);
  std::string s(data_.substr(pos_, n));
  pos_ += n;
  return s;
}

namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw rendezvous_error(std::string("rendezvous: send failed: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Returns bytes read before end of stream (n on success).
size_t read_all(int fd, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw rendezvous_error(std::string("rendezvous: receive failed: ") + std::strerror(errno));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

void send_frame(int fd, std::string_view body) {
  char len[4];
  uint32_t n = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) len[i] = static_cast<char>((n >> (8 * (3 - i))) & 0xff);
  std::string frame(len, 4);
  frame.append(body);
  write_all(fd, frame.data(), frame.size());
}

bool recv_frame(int fd, std::string& body) {
  unsigned char len[4];
  size_t got = read_all(fd, reinterpret_cast<char*>(len), 4);
  if (got == 0) return false;
  if (got < 4) throw rendezvous_error("rendezvous: connection closed mid-message");
  uint32_t n = (uint32_t(len[0]) << 24) | (uint32_t(len[1]) << 16) | (uint32_t(len[2]) << 8) | len[3];
  body.resize(n);
  if (read_all(fd, body.data(), n) < n) throw rendezvous_error("rendezvous: connection closed mid-message");
  return true;
}

int connect_with_retry(const host_port& addr, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error = "no attempt";
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(addr.host.c_str(), std::to_string(addr.port).c_str(), &hints, &res);
    if (rc != 0) {
      last_error = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          ::freeaddrinfo(res);
          return fd;
        }
        last_error = std::strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    if (std::chrono::steady_clock::now() + pause > deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  throw rendezvous_error("cannot reach the rendezvous store at " + addr.str() + " within " +
                         std::to_string(timeout.count()) + " ms (" + last_error +
                         "); check that rank 0 or mactor is running and the address is reachable");
}

int listen_tcp(int& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw rendezvous_error(std::string("rendezvous: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 256) != 0) {
    int err = errno;
    ::close(fd);
    throw rendezvous_error("rendezvous store cannot listen on port " + std::to_string(port) + ": " +
                           std::strerror(err) + "; pick another port (MASTER_PORT / --rdzv-port)");
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

}  // namespace mactor::comm
