// .npy format 1.0, as numpy.save writes it: magic, version, header dict padded to 64 bytes, data.
#include "data/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/data_error.hpp"

namespace mactor::data {

void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes) {
  std::string sh = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) sh += ", ";
    sh += std::to_string(shape[i]);
  }
  if (shape.size() == 1) sh += ",";
  sh += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + sh + ", }";
  // numpy pads with spaces so that magic+len+header+'\n' is a multiple of 64.
  const std::size_t pre = 10;
  std::size_t total = pre + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  // Written beside the file and renamed over it: ranks that build the same index cache at once
  // (or one that reads it meanwhile) never see a file half written.
  static std::atomic<unsigned> serial{0};
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out) throw data_error(path + ": cannot open for writing; check --data-cache-path");
    const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    out.write(magic, 8);
    const auto hl = static_cast<std::uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&hl), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    out.close();
    if (!out) {
      std::filesystem::remove(temporary);
      throw data_error(path + ": write failed (is the disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary);
    throw data_error(path + ": cannot replace it (" + ec.message() + "); check --data-cache-path");
  }
}

namespace {

// Reads a .npy header from `in` (positioned anywhere; the file is `size` bytes): fills the descr
// and shape of `a` and returns the payload's byte offset.
std::size_t read_npy_header(std::ifstream& in, const std::string& path, std::size_t size, npy_array& a) {
  in.seekg(0);
  char prefix[12] = {};
  in.read(prefix, static_cast<std::streamsize>(std::min<std::size_t>(size, sizeof prefix)));
  if (size < 10 || std::memcmp(prefix, "\x93NUMPY", 6) != 0)
    throw data_error(path + " at byte offset 0: not a .npy file (bad magic)");
  std::size_t hl = 0, start = 0;
  if (prefix[6] == 1) {
    hl = static_cast<unsigned char>(prefix[8]) | (static_cast<unsigned char>(prefix[9]) << 8);
    start = 10;
  } else {
    if (size < 12) throw data_error(path + " at byte offset 8: truncated .npy header");
    std::uint32_t h;
    std::memcpy(&h, prefix + 8, 4);
    hl = h;
    start = 12;
  }
  if (start + hl > size) throw data_error(path + " at byte offset " + std::to_string(start) + ": truncated .npy header");
  std::string header(hl, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(start));
  in.read(header.data(), static_cast<std::streamsize>(hl));
  auto d = header.find("'descr': '");
  if (d == std::string::npos) throw data_error(path + ": .npy header has no descr");
  d += 10;
  a.descr = header.substr(d, header.find('\'', d) - d);
  if (header.find("'fortran_order': True") != std::string::npos)
    throw data_error(path + ": Fortran-order .npy is not supported");
  auto s = header.find("'shape': (");
  if (s == std::string::npos) throw data_error(path + ": .npy header has no shape");
  s += 10;
  auto e = header.find(')', s);
  std::string dims = header.substr(s, e - s);
  std::size_t pos = 0;
  while (pos < dims.size()) {
    while (pos < dims.size() && (dims[pos] == ' ' || dims[pos] == ',')) ++pos;
    if (pos >= dims.size()) break;
    std::size_t used = 0;
    a.shape.push_back(std::stoll(dims.substr(pos), &used));
    pos += used;
  }
  return start + hl;
}

}  // namespace

npy_array read_npy(const std::string& path) {
  // The header, then the payload read straight into place (index caches run to hundreds of MB).
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw data_error(path + ": cannot open");
  const auto size = static_cast<std::size_t>(in.tellg());
  npy_array a;
  const std::size_t offset = read_npy_header(in, path, size, a);
  a.bytes.resize(size - offset);
  in.read(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
  if (!in) throw data_error(path + ": read failed after the header");
  return a;
}

npy_mapping map_npy(const std::string& path) {
  npy_mapping m;
  std::size_t size = 0, offset = 0;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw data_error(path + ": cannot open");
    size = static_cast<std::size_t>(in.tellg());
    offset = read_npy_header(in, path, size, m.header);
  }
  m.bytes = size - offset;
  if (m.bytes == 0) return m;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw data_error(path + ": cannot open (" + std::strerror(errno) + ")");
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw data_error(path + ": cannot map (" + std::strerror(errno) + ")");
  m.hold = std::shared_ptr<const void>(p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
  m.data = static_cast<const char*>(p) + offset;
  return m;
}

std::vector<std::int64_t> npy_to_int64(const npy_array& a, const std::string& path) {
  std::size_t size = 0;
  char kind = a.descr.size() >= 3 ? a.descr[1] : '?';
  if (a.descr.size() >= 3) size = static_cast<std::size_t>(std::stoi(a.descr.substr(2)));
  if ((kind != 'i' && kind != 'u') || (a.descr[0] != '<' && a.descr[0] != '|') || size == 0 || size > 8)
    throw data_error(path + ": .npy dtype " + a.descr + " is not a little-endian integer");
  std::vector<std::int64_t> out(a.bytes.size() / size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char* p = a.bytes.data() + i * size;
    std::uint64_t u = 0;
    std::memcpy(&u, p, size);
    if (kind == 'i' && size < 8 && (u >> (8 * size - 1)) & 1) u |= ~0ULL << (8 * size);
    out[i] = static_cast<std::int64_t>(u);
  }
  return out;
}

}  // namespace mactor::data
