// NullTokenizer: the text is already space-separated token ids; eod is one past the vocabulary.
#include <charconv>

#include "data/data_error.hpp"
#include "data/tokenizer.hpp"

namespace mactor::data {
namespace {

class null_tokenizer : public tokenizer {
 public:
  explicit null_tokenizer(std::int64_t vocab_size) : n_(vocab_size) {}
  std::vector<std::int64_t> tokenize(std::string_view text) const override {
    // Python's [int(x) for x in text.split(' ')]: every single space separates.
    std::vector<std::int64_t> out;
    std::size_t pos = 0;
    while (true) {
      const auto sp = text.find(' ', pos);
      const auto tok = text.substr(pos, sp == std::string_view::npos ? std::string_view::npos : sp - pos);
      std::int64_t v = 0;
      auto t = tok;
      while (!t.empty() && (t.front() == '\t' || t.front() == '\n' || t.front() == '\r')) t.remove_prefix(1);
      while (!t.empty() && (t.back() == '\t' || t.back() == '\n' || t.back() == '\r')) t.remove_suffix(1);
      if (!t.empty() && t.front() == '+') t.remove_prefix(1);
      auto r = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size())
        throw data_error("NullTokenizer: '" + std::string(tok) +
                         "' is not an integer token id; NullTokenizer text must be ids separated by single spaces");
      out.push_back(v);
      if (sp == std::string_view::npos) break;
      pos = sp + 1;
    }
    return out;
  }
  std::string detokenize(const std::vector<std::int64_t>& ids) const override {
    std::string s;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) s += ' ';
      s += std::to_string(ids[i]);
    }
    return s;
  }
  std::int64_t vocab_size() const override { return n_ + 1; }
  std::int64_t eod() const override { return n_; }
  std::optional<std::int64_t> pad() const override { return std::nullopt; }
  nlohmann::ordered_json unique_identifiers() const override {
    nlohmann::ordered_json j;
    j["class"] = "_NullTokenizer";
    j["tokenizer_path"] = nlohmann::ordered_json::array({nullptr});  // Megatron passes None as the path
    j["vocab_size"] = std::to_string(n_);
    return j;
  }

 private:
  std::int64_t n_;
};

}  // namespace

std::unique_ptr<tokenizer> make_null_tokenizer(std::int64_t vocab_size) {
  if (vocab_size <= 0)
    throw data_error("--vocab-size=" + std::to_string(vocab_size) + ": NullTokenizer needs a positive --vocab-size");
  return std::make_unique<null_tokenizer>(vocab_size);
}

}  // namespace mactor::data
