// Unicode character classes the tiktoken pre-tokenizers ask about (general categories L*, M, N
// and White_Space), as the Rust `regex` crate behind tiktoken defines \p{..} and \s, and UTF-8
// decoding that turns an invalid byte into a one-byte character of its own.
#pragma once
#include <cstdint>
#include <string_view>

namespace mactor::data {

/// Bits for one code point's classes.
enum unicode_bits : std::uint8_t {
  uc_upper = 1,     // Lu
  uc_title = 2,     // Lt
  uc_lower = 4,     // Ll
  uc_modifier = 8,  // Lm
  uc_other_letter = 16,  // Lo
  uc_mark = 32,     // M (Mn, Mc, Me)
  uc_number = 64,   // N (Nd, Nl, No)
  uc_space = 128,   // White_Space (what \s means to tiktoken's regex engine)
};
constexpr std::uint8_t uc_letter = uc_upper | uc_title | uc_lower | uc_modifier | uc_other_letter;

/// The classes of code point `cp` (0 for an invalid byte, which is in none of them).
std::uint8_t unicode_classes(std::uint32_t cp);

/// Unicode White_Space.
bool is_unicode_whitespace(std::uint32_t cp);

/// One decoded character: its code point (0xFFFFFFFF for an invalid byte) and byte length.
struct utf8_char {
  std::uint32_t cp;
  std::size_t len;
};
utf8_char decode_utf8(std::string_view s, std::size_t pos);
/// The UTF-8 bytes of code point `cp` (<= U+10FFFF).
std::string encode_utf8(std::uint32_t cp);

}  // namespace mactor::data
