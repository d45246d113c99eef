// Byte-level BPE: RE2 does GPT-2's pre-tokenization except the `\s+(?!\S)` lookahead (RE2 has no
// lookaround), which is emulated by giving back the last whitespace of a run that precedes text.
#include "data/byte_level_bpe.hpp"

#include <re2/re2.h>

#include <limits>

#include "data/data_error.hpp"
#include "data/unicode_class.hpp"

namespace mactor::data {
namespace {


// Unicode White_Space (what \s means to tiktoken's and HF's regex engines); RE2's \s is ASCII.
constexpr const char* ws = "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}";

// True when the whole of `s` is Unicode White_Space (then it came from the `\s+` alternative).
bool all_whitespace(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = c;
    std::size_t n = 1;
    if (c >= 0x80) {
      n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      cp = c & (0xff >> (n + 1));
      for (std::size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    }
    const bool ws_cp = (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
                       (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                       cp == 0x205f || cp == 0x3000;
    if (!ws_cp) return false;
    i += n;
  }
  return true;
}

}  // namespace

const std::vector<std::string>& byte_to_unicode() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    std::vector<bool> direct(256, false);
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xa1; b <= 0xac; ++b) direct[b] = true;
    for (int b = 0xae; b <= 0xff; ++b) direct[b] = true;
    int n = 0;
    for (int b = 0; b < 256; ++b) t[b] = encode_utf8(direct[b] ? b : 256 + n++);
    return t;
  }();
  return table;
}

byte_level_bpe::byte_level_bpe(std::unordered_map<std::string, std::int64_t> vocab,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               std::string source)
    : vocab_(std::move(vocab)) {
  // Map each byte-level unicode character back to its byte to get every token's raw bytes.
  std::unordered_map<std::string, char> u2b;
  const auto& b2u = byte_to_unicode();
  for (int b = 0; b < 256; ++b) u2b[b2u[b]] = static_cast<char>(b);
  std::int64_t max_id = -1;
  for (const auto& [text, id] : vocab_) max_id = std::max(max_id, id);
  id_to_bytes_.resize(static_cast<std::size_t>(max_id + 1));
  for (const auto& [text, id] : vocab_) {
    std::string raw;
    bool byte_level = true;
    for (std::size_t i = 0; i < text.size();) {
      const auto c = static_cast<unsigned char>(text[i]);
      const std::size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      auto it = u2b.find(text.substr(i, n));
      if (it == u2b.end()) { byte_level = false; break; }
      raw += it->second;
      i += n;
    }
    id_to_bytes_[static_cast<std::size_t>(id)] = byte_level ? raw : text;  // special tokens as written
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(b2u[b]);
    if (it == vocab_.end())
      throw data_error(source + ": the vocabulary lacks the byte-level token for byte " + std::to_string(b) +
                       "; is this a byte-level BPE vocabulary (GPT-2 style)?");
    byte_id_[b] = it->second;
  }
  for (std::size_t r = 0; r < merges.size(); ++r) {
    auto a = vocab_.find(merges[r].first), b = vocab_.find(merges[r].second),
         m = vocab_.find(merges[r].first + merges[r].second);
    if (a == vocab_.end() || b == vocab_.end() || m == vocab_.end())
      throw data_error(source + ": merge " + std::to_string(r + 1) + " (" + merges[r].first + " " +
                       merges[r].second + ") uses tokens missing from the vocabulary; vocab and merges must match");
    const auto key = (static_cast<std::uint64_t>(a->second) << 32) | static_cast<std::uint64_t>(b->second);
    merges_.emplace(key, std::make_pair(static_cast<std::int32_t>(r), m->second));
  }
  const std::string S = std::string("[") + ws + "]";
  const std::string pat = std::string("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^") + ws +
                          "\\p{L}\\p{N}]+|" + S + "+";
  pattern_ = std::make_unique<re2::RE2>(pat);
  if (!pattern_->ok()) throw data_error("internal: GPT-2 pre-tokenizer pattern: " + pattern_->error());
}

byte_level_bpe::~byte_level_bpe() = default;

std::vector<std::string> byte_level_bpe::pre_tokenize(std::string_view text) const {
  std::vector<std::string> pieces;
  std::size_t pos = 0;
  re2::StringPiece input(text.data(), text.size()), m[1];
  while (pos < text.size()) {
    std::size_t len;
    // Only the overall match is asked for, so RE2 can use its DFA; a match made only of
    // whitespace can only come from the `\s+` alternative.
    if (pattern_->Match(input, pos, text.size(), re2::RE2::ANCHOR_START, m, 1)) {
      len = m[0].size();
      // `\s+(?!\S)`: a whitespace run followed by text gives its last character to that text.
      if (pos + len < text.size() && all_whitespace(text.substr(pos, len))) {
        std::size_t back = len - 1;  // step back one UTF-8 character
        while (back > 0 && (static_cast<unsigned char>(text[pos + back]) & 0xc0) == 0x80) --back;
        if (back > 0) len = back;  // a single whitespace character stays whole
      }
    } else {
      len = 1;  // invalid UTF-8 byte: its own piece
    }
    if (len == 0) len = 1;
    pieces.emplace_back(text.substr(pos, len));
    pos += len;
  }
  return pieces;
}

void byte_level_bpe::encode(std::string_view text, std::vector<std::int64_t>& out) const {
  for (const auto& piece : pre_tokenize(text)) encode_piece(piece, out);
}

void byte_level_bpe::encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const {
  const std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int64_t> parts;
  parts.reserve(piece.size());
  for (char c : piece) parts.push_back(byte_id_[static_cast<unsigned char>(c)]);
  while (parts.size() > 1) {
    std::int32_t best_rank = std::numeric_limits<std::int32_t>::max();
    std::size_t best = 0;
    std::int64_t best_id = -1;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto k = (static_cast<std::uint64_t>(parts[i]) << 32) | static_cast<std::uint64_t>(parts[i + 1]);
      auto it = merges_.find(k);
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best = i;
        best_id = it->second.second;
      }
    }
    if (best_id < 0) break;
    parts[best] = best_id;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  out.insert(out.end(), parts.begin(), parts.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() > 1000000) cache_.clear();
  cache_.emplace(key, std::move(parts));
}

std::string byte_level_bpe::decode(const std::vector<std::int64_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= id_to_bytes_.size())
      throw data_error("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                       std::to_string(id_to_bytes_.size()) + ")");
    out += id_to_bytes_[static_cast<std::size_t>(id)];
  }
  return out;
}

std::int64_t byte_level_bpe::id_of(const std::string& token_text) const {
  auto it = vocab_.find(token_text);
  return it == vocab_.end() ? -1 : it->second;
}

}  // namespace mactor::data
