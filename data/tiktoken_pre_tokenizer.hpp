// Megatron's TikTokenizer pre-tokenizers (PATTERN_TIKTOKEN "v1" and PATTERN_TIKTOKEN_V2 "v2" in
// core_v0.15.0), written out by hand: the patterns use a possessive quantifier and a lookahead
// that RE2 lacks. The split equals tiktoken's (fancy-regex, leftmost-first backtracking):
//   v1: [^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+
//   v2: [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
//       [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|
//        ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mactor::data {

enum class tiktoken_pattern { v1, v2 };

/// Parses --tiktoken-pattern ("v1" or "v2"); throws data_error otherwise.
tiktoken_pattern parse_tiktoken_pattern(const std::string& name);
/// Megatron's pattern text (for unique_identifiers).
const char* tiktoken_pattern_text(tiktoken_pattern p);

/// The pieces `text` splits into, in order; they cover the text exactly.
std::vector<std::string_view> tiktoken_pre_tokenize(std::string_view text, tiktoken_pattern p);

}  // namespace mactor::data
