// durable_file and friends over open/write/fsync/rename.
#include "checkpoint/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::checkpoint {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw checkpoint_error("checkpoint: cannot " + what + " " + path.string() + ": " +
                         std::strerror(errno) + " (check the disk's free space and permissions)");
}

}  // namespace

durable_file::durable_file(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", path);
}

durable_file::~durable_file() {
  if (fd_ >= 0) ::close(fd_);
}

void durable_file::write(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", path_);
    }
    p += n;
    size -= std::size_t(n);
    written_ += std::size_t(n);
  }
}

void durable_file::close() {
  if (::fsync(fd_) != 0) fail("fsync", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", path_);
}

namespace {

// A directory opened before a rename into it: its fsync still works when another process (rank 0
// committing) renames the directory itself right after.
class open_directory {
 public:
  explicit open_directory(const std::filesystem::path& dir) : dir_(dir) {
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) fail("open directory", dir);
  }
  ~open_directory() { ::close(fd_); }
  void sync() const {
    if (::fsync(fd_) != 0 && errno != EINVAL) fail("fsync directory", dir_);  // EINVAL: no dir fsync
  }

 private:
  std::filesystem::path dir_;
  int fd_ = -1;
};

}  // namespace

void fsync_directory(const std::filesystem::path& dir) { open_directory(dir).sync(); }

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  static std::atomic<unsigned> counter{0};
  auto tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  {
    durable_file f(tmp);
    f.write(content.data(), content.size());
    f.close();
  }
  const open_directory parent(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename into place", path);
  parent.sync();
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("read", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace mactor::checkpoint
