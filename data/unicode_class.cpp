// Unicode classes: White_Space is a fixed list; the general categories come from RE2's Unicode
// tables, asked once per code point and remembered in a table shared by all threads.
#include "data/unicode_class.hpp"

#include <re2/re2.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace mactor::data {
namespace {

constexpr std::uint32_t max_cp = 0x10ffff;

struct category_matchers {
  std::vector<std::pair<std::uint8_t, std::unique_ptr<re2::RE2>>> by_bit;
  category_matchers() {
    const std::pair<std::uint8_t, const char*> cats[] = {
        {uc_upper, "\\p{Lu}"}, {uc_title, "\\p{Lt}"}, {uc_lower, "\\p{Ll}"}, {uc_modifier, "\\p{Lm}"},
        {uc_other_letter, "\\p{Lo}"}, {uc_mark, "\\p{M}"}, {uc_number, "\\p{N}"}};
    for (const auto& [bit, pat] : cats) by_bit.emplace_back(bit, std::make_unique<re2::RE2>(pat));
  }
};


std::uint8_t compute_classes(std::uint32_t cp) {
  static const category_matchers m;
  std::uint8_t bits = is_unicode_whitespace(cp) ? uc_space : 0;
  if (cp >= 0xd800 && cp <= 0xdfff) return bits;  // surrogates cannot be written in UTF-8
  const std::string s = encode_utf8(cp);
  for (const auto& [bit, re] : m.by_bit)
    if (re2::RE2::FullMatch(s, *re)) bits |= bit;
  return bits;
}

}  // namespace

bool is_unicode_whitespace(std::uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

std::uint8_t unicode_classes(std::uint32_t cp) {
  if (cp > max_cp) return 0;
  // Entry = classes + 1 once computed (0: not yet). Racing threads compute the same value.
  static std::array<std::atomic<std::uint16_t>, max_cp + 1> table{};
  const auto known = table[cp].load(std::memory_order_relaxed);
  if (known) return static_cast<std::uint8_t>(known - 1);
  const std::uint8_t bits = compute_classes(cp);
  table[cp].store(static_cast<std::uint16_t>(bits + 1), std::memory_order_relaxed);
  return bits;
}

std::string encode_utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

utf8_char decode_utf8(std::string_view s, std::size_t pos) {
  constexpr utf8_char invalid{0xffffffffu, 1};
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return {c, 1};
  std::size_t n;
  std::uint32_t cp;
  if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f;
  else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f;
  else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07;
  else return invalid;
  if (pos + n > s.size()) return invalid;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xc0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3f);
  }
  return {cp, n};
}

}  // namespace mactor::data
