// Token generation and the token file's permission rules (see access_token.hpp).
#include "inspector/access_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mactor::inspector {
namespace {

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error("inspector token file " + path + ": " + what);
}

// O_NOFOLLOW: a link planted at the path must not redirect the token somewhere readable.
int open_private(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  if (errno != EEXIST)
    throw file_error(path, std::string("cannot create it: ") + std::strerror(errno) +
                               "; choose a path in a directory you can write");
  fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    throw file_error(path, std::string("exists and cannot be opened (") + std::strerror(errno) +
                               "); remove it or choose another path");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    ::close(fd);
    throw file_error(path, "exists and other users could read or write it (or it is not your "
                           "regular file); remove it or `chmod 600` it, or choose another path");
  }
  if (::ftruncate(fd, 0) != 0) {
    ::close(fd);
    throw file_error(path, std::string("cannot truncate it: ") + std::strerror(errno));
  }
  return fd;
}

}  // namespace

std::string make_access_token() {
  unsigned char bytes[32];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    throw std::runtime_error("inspector: cannot read /dev/urandom to make an access token");
  static constexpr char hex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(hex[b >> 4]);
    token.push_back(hex[b & 15]);
  }
  return token;
}

void write_token_file(const std::string& path, std::string_view token) {
  int fd = open_private(path);
  std::string text = std::string(token) + "\n";
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      throw file_error(path, std::string("cannot write it: ") + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
}

std::string default_token_path(const std::string& home, const std::string& job_id) {
  return home + "/.mactor/inspector/" + job_id + ".token";
}

int remove_job_token_files(const std::string& home, const std::string& job_id) {
  if (home.empty() || job_id.empty() || job_id.find('/') != std::string::npos) return 0;
  const std::filesystem::path dir = std::filesystem::path(default_token_path(home, job_id)).parent_path();
  const std::string own = job_id + ".token", restart = job_id + "-r";
  int removed = 0;
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = e.path().filename().string();
    const bool generation = name.rfind(restart, 0) == 0 && name.size() > restart.size() + 6 &&
                            name.compare(name.size() - 6, 6, ".token") == 0 &&
                            name.find_first_not_of("0123456789", restart.size()) == name.size() - 6;
    std::error_code gone;
    if ((name == own || generation) && std::filesystem::remove(e.path(), gone)) ++removed;
  }
  return removed;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw file_error(path, std::string("cannot read it: ") + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const char* space = " \t\r\n";
  auto first = token.find_first_not_of(space);
  if (first == std::string::npos) throw file_error(path, "is empty; it should hold the token");
  return token.substr(first, token.find_last_not_of(space) - first + 1);
}

bool tokens_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace mactor::inspector
