// Line-buffered relay of ranks' output with Open MPI's tag and timestamp prefixes.
#include "tools/launcher/output_relay.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

namespace mactor::tools {

output_relay::output_relay(bool tag, bool timestamp, std::string output_dir)
    : tag_(tag), timestamp_(timestamp), dir_(std::move(output_dir)) {}

output_relay::~output_relay() { flush_all(); }

std::pair<int, int> output_relay::add_rank(int rank) {
  std::FILE* files[2] = {nullptr, nullptr};
  if (!dir_.empty()) {
    // Open MPI's layout: DIR/1/rank.N/stdout and stderr.
    auto d = std::filesystem::path(dir_) / "1" / ("rank." + std::to_string(rank));
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    for (int k = 0; k < 2; ++k) {
      auto p = d / (k ? "stderr" : "stdout");
      files[k] = std::fopen(p.c_str(), "we");
      if (!files[k])
        throw std::runtime_error("--output-filename: cannot write " + p.string() + ": " +
                                 std::strerror(errno) + "; pick a writable directory");
    }
  }
  int ends[2];
  for (int k = 0; k < 2; ++k) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed; too many open files?");
    ::fcntl(p[0], F_SETFL, O_NONBLOCK);
    streams_.push_back({p[0], rank, k == 1, {}, files[k]});
    ends[k] = p[1];
  }
  return {ends[0], ends[1]};
}

std::vector<pollfd> output_relay::poll_fds() const {
  std::vector<pollfd> fds;
  for (auto& s : streams_)
    if (s.fd >= 0) fds.push_back({s.fd, POLLIN, 0});
  return fds;
}

bool output_relay::open_streams() const {
  for (auto& s : streams_)
    if (s.fd >= 0) return true;
  return false;
}

void output_relay::emit(stream& s, const std::string& line) {
  if (s.file) std::fwrite(line.data(), 1, line.size(), s.file);
  std::string out;
  if (timestamp_) {
    std::time_t now = std::time(nullptr);
    char buf[64];
    ::ctime_r(&now, buf);  // "Wed Dec  2 18:55:42 2026\n", as Open MPI prints it
    out.append(buf, std::strlen(buf) - 1);
  }
  if (tag_) out += "[1," + std::to_string(s.rank) + "]<" + (s.is_err ? "stderr" : "stdout") + ">:";
  out += line;
  int fd = s.is_err ? 2 : 1;
  const char* p = out.data();
  size_t n = out.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;  // our own stdout is gone; nothing better to do with the line
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void output_relay::close_stream(stream& s) {
  if (!s.partial.empty()) emit(s, s.partial + "\n");
  s.partial.clear();
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  if (s.file) std::fclose(s.file);
  s.file = nullptr;
}

void output_relay::on_readable(int fd) {
  for (auto& s : streams_) {
    if (s.fd != fd) continue;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;  // EAGAIN: drained for now
      if (n == 0) {
        close_stream(s);
        return;
      }
      s.partial.append(buf, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1)
        emit(s, s.partial.substr(start, nl + 1 - start));
      s.partial.erase(0, start);
    }
  }
}

void output_relay::flush_all() {
  for (auto& s : streams_) {
    if (s.fd >= 0) on_readable(s.fd);
    if (s.fd >= 0 || s.file) close_stream(s);
  }
}

}  // namespace mactor::tools
