// MD5 from RFC 1321's description (not for security: cache file names only).
#include "data/md5.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mactor::data {
namespace {

constexpr std::array<std::uint32_t, 64> shifts = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9,  14, 20, 5, 9,
    14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

std::array<std::uint32_t, 64> sine_table() {
  std::array<std::uint32_t, 64> k{};
  for (int i = 0; i < 64; ++i)
    k[i] = static_cast<std::uint32_t>(std::floor(std::fabs(std::sin(i + 1.0)) * 4294967296.0));
  return k;
}

std::uint32_t rotl(std::uint32_t x, std::uint32_t c) { return (x << c) | (x >> (32 - c)); }

}  // namespace

std::string md5_hex(std::string_view bytes) {
  static const auto k = sine_table();
  std::uint32_t a0 = 0x67452301, b0 = 0xefcdab89, c0 = 0x98badcfe, d0 = 0x10325476;
  std::string msg(bytes);
  const std::uint64_t bit_len = static_cast<std::uint64_t>(bytes.size()) * 8;
  msg += static_cast<char>(0x80);
  while (msg.size() % 64 != 56) msg += '\0';
  for (int i = 0; i < 8; ++i) msg += static_cast<char>((bit_len >> (8 * i)) & 0xff);
  for (std::size_t chunk = 0; chunk < msg.size(); chunk += 64) {
    std::uint32_t m[16];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + chunk + 4 * i);
      m[i] = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
    }
    std::uint32_t a = a0, b = b0, c = c0, d = d0;
    for (std::uint32_t i = 0; i < 64; ++i) {
      std::uint32_t f, g;
      if (i < 16) { f = (b & c) | (~b & d); g = i; }
      else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) % 16; }
      else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) % 16; }
      else { f = c ^ (b | ~d); g = (7 * i) % 16; }
      f = f + a + k[i] + m[g];
      a = d; d = c; c = b;
      b = b + rotl(f, shifts[i]);
    }
    a0 += a; b0 += b; c0 += c; d0 += d;
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::uint32_t v : {a0, b0, c0, d0})
    for (int i = 0; i < 4; ++i) {
      const unsigned byte = (v >> (8 * i)) & 0xff;
      out += hex[byte >> 4];
      out += hex[byte & 15];
    }
  return out;
}

}  // namespace mactor::data
