// megatron.core.tokenizers' ByteLevelTokenizer with its default arguments (the only ones
// build_tokenizer can give it): ids are the text's UTF-8 bytes; the vocabulary is 512 ids, the
// specials (pad 1, eos 0) among the bytes, and decoding drops ids at or past 512.
#include <string>

#include "data/tokenizer.hpp"

namespace mactor::data {
namespace {

class byte_level_tokenizer : public tokenizer {
 public:
  std::vector<std::int64_t> tokenize(std::string_view text) const override {
    std::vector<std::int64_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string detokenize(const std::vector<std::int64_t>& ids) const override {
    std::string s;
    for (auto id : ids)
      if (id >= 0 && id < 256) s.push_back(char(id));  // ids_to_text keeps those below special_start
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
    return s;  // (Python's decode(errors='ignore') also drops malformed UTF-8; kept here as bytes)
  }
  std::int64_t vocab_size() const override { return 512; }
  std::int64_t eod() const override { return 0; }
  std::optional<std::int64_t> pad() const override { return 1; }
  nlohmann::ordered_json unique_identifiers() const override {
    nlohmann::ordered_json j;
    j["class"] = "megatron.core.tokenizers.text.libraries.bytelevel_tokenizer.ByteLevelTokenizer";
    return j;
  }
};

}  // namespace

std::unique_ptr<tokenizer> make_byte_level_tokenizer() { return std::make_unique<byte_level_tokenizer>(); }

}  // namespace mactor::data
