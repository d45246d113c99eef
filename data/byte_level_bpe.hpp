// Byte-level BPE shared by GPT2BPETokenizer and HuggingFaceTokenizer: GPT-2's pre-tokenizer,
// the byte <-> unicode mapping, and merge-rank driven byte-pair merging with a per-word cache.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace re2 { class RE2; }

namespace mactor::data {

class byte_level_bpe {
 public:
  /// `vocab`: token text (byte-level unicode form) to id; `merges`: pairs in rank order.
  byte_level_bpe(std::unordered_map<std::string, std::int64_t> vocab,
                 const std::vector<std::pair<std::string, std::string>>& merges, std::string source);
  ~byte_level_bpe();

  /// Splits text with GPT-2's pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
  /// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+) and appends the BPE ids of every piece.
  void encode(std::string_view text, std::vector<std::int64_t>& out) const;
  /// Concatenates the tokens' bytes.
  std::string decode(const std::vector<std::int64_t>& ids) const;
  std::int64_t id_of(const std::string& token_text) const;  // -1 when absent
  std::size_t vocab_entries() const { return vocab_.size(); }
  /// The pieces the pre-tokenizer yields (for tests).
  std::vector<std::string> pre_tokenize(std::string_view text) const;

 private:
  void encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const;
  std::unordered_map<std::string, std::int64_t> vocab_;
  std::vector<std::string> id_to_bytes_;  // raw bytes of each id
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int64_t>> merges_;  // (a,b) -> (rank, id)
  std::int64_t byte_id_[256];
  std::unique_ptr<re2::RE2> pattern_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int64_t>> cache_;
};

/// GPT-2's bytes_to_unicode(): the printable character standing for each byte, as UTF-8.
const std::vector<std::string>& byte_to_unicode();

}  // namespace mactor::data
