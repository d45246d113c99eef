// Megatron's TikTokenizer (--tokenizer-type TikTokenizer). Ids 0..num_special_tokens-1 are the
// special tokens (the given list, then <SPECIAL_i> fillers); the vocabulary file's ranks follow,
// shifted by num_special_tokens, cut so that the whole is --vocab-size (default 2**17).
// Two Megatron code paths build it and mactor follows the one --legacy-tokenizer selects:
//   default (megatron.core.tokenizers TikTokenTokenizer): special tokens written in the text are
//     encoded as their ids (encode(allowed_special="all")); the list must hold <unk> <s> </s>
//     <mask> <pad> <cls> <sep> (the default); pad = <pad>'s id; the pattern defaults to v2.
//   --legacy-tokenizer (megatron.training CustomTikTokenizer): text is encoded with
//     encode_ordinary; the list must hold <unk> <s> </s> (the default); there is no pad id;
//     --tiktoken-pattern is required.
// Both use eod = </s>'s id. Byte-pair merging is tiktoken's: repeatedly join the adjacent pair
// whose bytes have the lowest rank (leftmost on ties).
#include <algorithm>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "data/data_error.hpp"
#include "data/tiktoken_pre_tokenizer.hpp"
#include "data/tiktoken_vocab.hpp"
#include "data/tokenizer.hpp"

namespace mactor::data {
namespace {

const std::vector<std::string> legacy_required = {"<unk>", "<s>", "</s>"};
const std::vector<std::string> library_required = {"<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"};
constexpr std::int64_t default_vocab_size = 131072;  // 2**17

// Python's repr() of a str (enough for token names) and of a list of them.
std::string py_repr(const std::string& s) {
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\' || c == static_cast<unsigned char>(q)) out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += "\\x", out += hex[c >> 4], out += hex[c & 15];
    } else out += static_cast<char>(c);
  }
  return out + q;
}

std::string py_repr(const std::optional<std::vector<std::string>>& v) {
  if (!v) return "None";
  std::string out = "[";
  for (std::size_t i = 0; i < v->size(); ++i) out += (i ? ", " : "") + py_repr((*v)[i]);
  return out + "]";
}

std::vector<std::string> special_token_list(const tokenizer_options& o, std::int64_t vocab_size) {
  const auto& required = o.legacy_tokenizer ? legacy_required : library_required;
  std::vector<std::string> specials = o.tiktoken_special_tokens.value_or(required);
  const auto n = o.tiktoken_num_special_tokens;
  if (std::unordered_set<std::string>(specials.begin(), specials.end()).size() != specials.size())
    throw data_error("--tiktoken-special-tokens: the special tokens must be unique");
  if (!(static_cast<std::int64_t>(specials.size()) <= n && n < vocab_size))
    throw data_error("TikTokenizer needs len(--tiktoken-special-tokens) <= --tiktoken-num-special-tokens < "
                     "--vocab-size; got " + std::to_string(specials.size()) + ", " + std::to_string(n) + ", " +
                     std::to_string(vocab_size));
  for (const auto& r : required)
    if (std::find(specials.begin(), specials.end(), r) == specials.end())
      throw data_error("--tiktoken-special-tokens must include " + py_repr(std::optional(required)) +
                       (o.legacy_tokenizer ? " (Megatron's legacy TikTokenizer)" : " (Megatron's TikTokenTokenizer; "
                        "with --legacy-tokenizer only <unk> <s> </s> are required)") + "; " + r + " is missing");
  for (auto i = static_cast<std::int64_t>(specials.size()); i < n; ++i)
    specials.push_back("<SPECIAL_" + std::to_string(i) + ">");
  return specials;
}

class tiktokenizer : public tokenizer {
 public:
  explicit tiktokenizer(const tokenizer_options& o);
  std::vector<std::int64_t> tokenize(std::string_view text) const override;
  std::string detokenize(const std::vector<std::int64_t>& ids) const override;
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::int64_t eod() const override { return special_id("</s>"); }
  std::optional<std::int64_t> pad() const override {
    if (legacy_) return std::nullopt;  // CustomTikTokenizer.pad reads an unset attribute; GPTDataset uses -1
    return special_id("<pad>");
  }
  nlohmann::ordered_json unique_identifiers() const override { return identifiers_; }

 private:
  std::int64_t special_id(const std::string& t) const { return specials_.at(t); }
  void encode_ordinary(std::string_view text, std::vector<std::int64_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const;
  std::int64_t rank_of(std::string_view bytes) const {
    auto it = ranks_.find(std::string(bytes));
    return it == ranks_.end() ? std::numeric_limits<std::int64_t>::max() : it->second;
  }

  bool legacy_;
  tiktoken_pattern pattern_;
  std::int64_t vocab_size_;
  std::vector<std::string> id_bytes_;                      // bytes (or special name) of every id
  std::unordered_map<std::string, std::int64_t> ranks_;    // token bytes -> id
  std::unordered_map<std::string, std::int64_t> specials_; // special name -> id
  std::vector<std::string> specials_longest_first_;
  nlohmann::ordered_json identifiers_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int64_t>> cache_;
};

nlohmann::ordered_json identifiers_of(const tokenizer_options& o, const std::string& path) {
  nlohmann::ordered_json j;
  const auto n = std::to_string(o.tiktoken_num_special_tokens);
  if (o.legacy_tokenizer) {  // MegatronLegacyTokenizer(path, pattern=, vocab_size=, num_special_tokens=, special_tokens=)
    j["class"] = "CustomTikTokenizer";
    j["tokenizer_path"] = {path};
    j["pattern"] = tiktoken_pattern_text(parse_tiktoken_pattern(*o.tiktoken_pattern));
    j["vocab_size"] = o.vocab_size ? std::to_string(*o.vocab_size) : "None";
  } else {  // MegatronTokenizerText: class path, path, then build_tokenizer's kwargs in order
    j["class"] = "megatron.core.tokenizers.text.models.default_tokenizer.DefaultTokenizerText";
    j["tokenizer_path"] = path;
    if (o.tiktoken_pattern && !o.tiktoken_pattern->empty()) j["pattern"] = *o.tiktoken_pattern;
    if (o.vocab_size && *o.vocab_size) j["vocab_size"] = std::to_string(*o.vocab_size);
  }
  j["num_special_tokens"] = n;
  j["special_tokens"] = py_repr(o.tiktoken_special_tokens);
  return j;
}

tiktokenizer::tiktokenizer(const tokenizer_options& o) : legacy_(o.legacy_tokenizer) {
  const auto& path = *o.tokenizer_model;
  if (legacy_ && !o.tiktoken_pattern)
    throw data_error("--tiktoken-pattern (v1 or v2) is required with --tokenizer-type TikTokenizer --legacy-tokenizer");
  pattern_ = parse_tiktoken_pattern(o.tiktoken_pattern && !o.tiktoken_pattern->empty() ? *o.tiktoken_pattern : "v2");
  vocab_size_ = o.vocab_size && *o.vocab_size ? *o.vocab_size : default_vocab_size;
  const auto names = special_token_list(o, vocab_size_);
  const auto n_special = static_cast<std::int64_t>(names.size());
  const std::int64_t inner = vocab_size_ - n_special;
  auto tokens = read_tiktoken_vocab(path, inner);
  if (static_cast<std::int64_t>(tokens.size()) < inner)
    throw data_error(path + ": has " + std::to_string(tokens.size()) + " entries but --vocab-size " +
                     std::to_string(vocab_size_) + (o.vocab_size ? "" : " (Megatron's default 2**17)") + " minus " +
                     std::to_string(n_special) + " special tokens needs " + std::to_string(inner) +
                     "; pass --vocab-size " + std::to_string(tokens.size() + names.size()) + " or less");
  id_bytes_ = names;
  for (std::int64_t i = 0; i < n_special; ++i) specials_[names[static_cast<std::size_t>(i)]] = i;
  specials_longest_first_ = names;
  std::stable_sort(specials_longest_first_.begin(), specials_longest_first_.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  ranks_.reserve(tokens.size());
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    ranks_.emplace(tokens[r], static_cast<std::int64_t>(r) + n_special);
    id_bytes_.push_back(std::move(tokens[r]));
  }
  identifiers_ = identifiers_of(o, path);
}

std::vector<std::int64_t> tiktokenizer::tokenize(std::string_view text) const {
  std::vector<std::int64_t> out;
  if (legacy_) {
    encode_ordinary(text, out);
    return out;
  }
  // encode(text, allowed_special="all"): ordinary text up to the next special token, then its id.
  std::size_t start = 0;
  for (std::size_t pos = text.find('<'); pos != std::string_view::npos; pos = text.find('<', pos)) {
    const std::string* hit = nullptr;
    for (const auto& s : specials_longest_first_)
      if (text.compare(pos, s.size(), s) == 0) { hit = &s; break; }
    if (!hit) { ++pos; continue; }
    encode_ordinary(text.substr(start, pos - start), out);
    out.push_back(special_id(*hit));
    start = pos = pos + hit->size();
  }
  encode_ordinary(text.substr(start), out);
  return out;
}

void tiktokenizer::encode_ordinary(std::string_view text, std::vector<std::int64_t>& out) const {
  for (auto piece : tiktoken_pre_tokenize(text, pattern_)) {
    if (auto it = ranks_.find(std::string(piece)); it != ranks_.end()) out.push_back(it->second);
    else encode_piece(piece, out);
  }
}

// tiktoken's _byte_pair_merge: parts[i] = (start, rank of bytes parts[i]..parts[i+2]).
void tiktokenizer::encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const {
  const std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  constexpr auto no_rank = std::numeric_limits<std::int64_t>::max();
  std::vector<std::pair<std::size_t, std::int64_t>> parts;
  for (std::size_t i = 0; i + 1 < piece.size(); ++i) parts.emplace_back(i, rank_of(piece.substr(i, 2)));
  parts.emplace_back(piece.size() - 1, no_rank);
  parts.emplace_back(piece.size(), no_rank);
  auto rank_at = [&](std::size_t i) {
    return i + 3 < parts.size() ? rank_of(piece.substr(parts[i].first, parts[i + 3].first - parts[i].first)) : no_rank;
  };
  for (;;) {
    std::size_t best = 0;
    std::int64_t best_rank = no_rank;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i].second < best_rank) best_rank = parts[i].second, best = i;
    if (best_rank == no_rank) break;
    if (best > 0) parts[best - 1].second = rank_at(best - 1);
    parts[best].second = rank_at(best);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i)
    ids.push_back(ranks_.at(std::string(piece.substr(parts[i].first, parts[i + 1].first - parts[i].first))));
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() > 1000000) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

std::string tiktokenizer::detokenize(const std::vector<std::int64_t>& ids) const {
  std::string out;
  for (auto id : ids) {
    if (id < 0 || id >= static_cast<std::int64_t>(id_bytes_.size()))
      throw data_error("token id " + std::to_string(id) + " is outside the TikTokenizer vocabulary (size " +
                       std::to_string(id_bytes_.size()) + ")");
    out += id_bytes_[static_cast<std::size_t>(id)];
  }
  return out;
}

}  // namespace

std::unique_ptr<tokenizer> make_tiktokenizer(const tokenizer_options& o) {
  if (!o.tokenizer_model || o.tokenizer_model->empty())
    throw data_error("--tokenizer-model is required with --tokenizer-type TikTokenizer");
  return std::make_unique<tiktokenizer>(o);
}

}  // namespace mactor::data
