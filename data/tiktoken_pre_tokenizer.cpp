// The TikTokenizer patterns as a scanner over decoded characters. Each alternative is tried in
// the pattern's order at the current character; each returns the end of its match (or `none`),
// taking the backtracking a leftmost-first engine would do into account.
#include "data/tiktoken_pre_tokenizer.hpp"

#include "data/data_error.hpp"
#include "data/unicode_class.hpp"

namespace mactor::data {
namespace {

constexpr std::size_t none = static_cast<std::size_t>(-1);
constexpr std::uint8_t upperish = uc_upper | uc_title | uc_modifier | uc_other_letter | uc_mark;  // [Lu Lt Lm Lo M]
constexpr std::uint8_t lowerish = uc_lower | uc_modifier | uc_other_letter | uc_mark;             // [Ll Lm Lo M]

struct ch {
  std::size_t off;
  std::uint32_t cp;
  std::uint8_t cls;
};

class scanner {
 public:
  explicit scanner(std::string_view text) {
    for (std::size_t pos = 0; pos < text.size();) {
      const auto u = decode_utf8(text, pos);
      c_.push_back({pos, u.cp, unicode_classes(u.cp)});
      pos += u.len;
    }
    c_.push_back({text.size(), 0, 0});  // sentinel: offset of the end
  }
  std::size_t size() const { return c_.size() - 1; }
  std::size_t offset(std::size_t i) const { return c_[i].off; }
  std::size_t next_v1(std::size_t i) const;
  std::size_t next_v2(std::size_t i) const;

 private:
  bool has(std::size_t i, std::uint8_t bits) const { return i < size() && (c_[i].cls & bits); }
  bool crlf(std::size_t i) const { return i < size() && (c_[i].cp == '\r' || c_[i].cp == '\n'); }
  // [^\r\n\p{L}\p{N}]
  bool pre(std::size_t i) const { return i < size() && !crlf(i) && !(c_[i].cls & (uc_letter | uc_number)); }
  // [^\s\p{L}\p{N}]
  bool punct(std::size_t i) const { return i < size() && !(c_[i].cls & (uc_letter | uc_number | uc_space)); }
  std::size_t run(std::size_t i, std::uint8_t bits) const {
    while (has(i, bits)) ++i;
    return i;
  }
  std::size_t upper_then_lower(std::size_t p) const;
  std::size_t upper_plus_lower(std::size_t p) const;
  std::size_t space_punct(std::size_t i, bool slash_tail) const;
  std::size_t whitespace(std::size_t i) const;
  std::vector<ch> c_;
};

// [Lu Lt Lm Lo M]*[Ll Lm Lo M]+ at p: the upper run, then a lower run; failing that, the upper
// run backs off to its last character that is also lower-ish.
std::size_t scanner::upper_then_lower(std::size_t p) const {
  const std::size_t q = run(p, upperish);
  if (has(q, lowerish)) return run(q, lowerish);
  for (std::size_t r = q; r > p; --r)
    if (has(r - 1, lowerish)) return r;
  return none;
}

// [Lu Lt Lm Lo M]+[Ll Lm Lo M]* at p.
std::size_t scanner::upper_plus_lower(std::size_t p) const {
  const std::size_t q = run(p, upperish);
  return q == p ? none : run(q, lowerish);
}

// " ?[^\s\p{L}\p{N}]+" then [\r\n]* (v1) or [\r\n/]* (v2).
std::size_t scanner::space_punct(std::size_t i, bool slash_tail) const {
  std::size_t j = (c_[i].cp == ' ' && punct(i + 1)) ? i + 1 : i;
  if (!punct(j)) return none;
  while (punct(j)) ++j;
  while (crlf(j) || (slash_tail && j < size() && c_[j].cp == '/')) ++j;
  return j;
}

// \s*[\r\n]+ (or \s*[\r\n]) | \s+(?!\S) | \s+ at a whitespace character i.
std::size_t scanner::whitespace(std::size_t i) const {
  const std::size_t j = run(i, uc_space);
  for (std::size_t k = j; k > i; --k)
    if (crlf(k - 1)) return k;  // through the run's last newline
  return (j == size() || j - i == 1) ? j : j - 1;  // a run before text leaves its last character
}

std::size_t scanner::next_v1(std::size_t i) const {
  const std::size_t p = pre(i) ? i + 1 : i;  // possessive ?+: a taken character is not given back
  if (has(p, uc_letter)) return run(p, uc_letter);
  if (has(i, uc_number)) return i + 1;
  if (auto e = space_punct(i, false); e != none) return e;
  if (has(i, uc_space)) return whitespace(i);
  return i + 1;  // not reached: every character is a letter, number, space or other
}

std::size_t scanner::next_v2(std::size_t i) const {
  if (pre(i))
    if (auto e = upper_then_lower(i + 1); e != none) return e;
  if (auto e = upper_then_lower(i); e != none) return e;
  if (pre(i))
    if (auto e = upper_plus_lower(i + 1); e != none) return e;
  if (auto e = upper_plus_lower(i); e != none) return e;
  if (has(i, uc_number)) return i + 1;
  if (auto e = space_punct(i, true); e != none) return e;
  if (has(i, uc_space)) return whitespace(i);
  return i + 1;
}

}  // namespace

tiktoken_pattern parse_tiktoken_pattern(const std::string& name) {
  if (name == "v1") return tiktoken_pattern::v1;
  if (name == "v2") return tiktoken_pattern::v2;
  throw data_error("--tiktoken-pattern " + name + " is not one of Megatron's patterns; use v1 or v2");
}

const char* tiktoken_pattern_text(tiktoken_pattern p) {
  if (p == tiktoken_pattern::v1)
    return R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
  return R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

std::vector<std::string_view> tiktoken_pre_tokenize(std::string_view text, tiktoken_pattern p) {
  const scanner s(text);
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t e = p == tiktoken_pattern::v1 ? s.next_v1(i) : s.next_v2(i);
    pieces.push_back(text.substr(s.offset(i), s.offset(e) - s.offset(i)));
    i = e;
  }
  return pieces;
}

}  // namespace mactor::data
