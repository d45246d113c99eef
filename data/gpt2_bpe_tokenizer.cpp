// GPT2BPETokenizer: vocab.json + merges.txt byte-level BPE; <|endoftext|> is the eod.
#include <sstream>

#include "data/byte_level_bpe.hpp"
#include "data/data_error.hpp"
#include "data/text_file.hpp"
#include "data/tokenizer.hpp"

namespace mactor::data {
namespace {

class gpt2_bpe_tokenizer : public tokenizer {
 public:
  gpt2_bpe_tokenizer(const std::string& vocab_file, const std::string& merge_file)
      : vocab_file_(vocab_file), merge_file_(merge_file), bpe_(load_vocab(vocab_file), load_merges(merge_file), vocab_file) {
    eod_ = bpe_.id_of("<|endoftext|>");
    if (eod_ < 0) throw data_error(vocab_file + ": has no <|endoftext|> token; is this GPT-2's vocab.json?");
    size_ = static_cast<std::int64_t>(bpe_.vocab_entries());
  }
  std::vector<std::int64_t> tokenize(std::string_view text) const override {
    std::vector<std::int64_t> out;
    bpe_.encode(text, out);
    return out;
  }
  std::string detokenize(const std::vector<std::int64_t>& ids) const override { return bpe_.decode(ids); }
  std::int64_t vocab_size() const override { return size_; }
  std::int64_t eod() const override { return eod_; }
  std::optional<std::int64_t> pad() const override { return std::nullopt; }
  nlohmann::ordered_json unique_identifiers() const override {
    nlohmann::ordered_json j;
    j["class"] = "_GPT2BPETokenizer";
    j["tokenizer_path"] = {vocab_file_, merge_file_};
    return j;
  }

 private:
  static std::unordered_map<std::string, std::int64_t> load_vocab(const std::string& path) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(path, "--vocab-file"));
    } catch (const nlohmann::json::exception& e) {
      throw data_error("--vocab-file=" + path + ": not valid JSON (" + e.what() + ")");
    }
    std::unordered_map<std::string, std::int64_t> v;
    for (auto& [k, id] : j.items()) v[k] = id.get<std::int64_t>();
    return v;
  }
  static std::vector<std::pair<std::string, std::string>> load_merges(const std::string& path) {
    std::istringstream in(read_text_file(path, "--merge-file"));
    std::vector<std::pair<std::string, std::string>> m;
    std::string line;
    std::size_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
      auto sp = line.find(' ');
      if (sp == std::string::npos)
        throw data_error("--merge-file=" + path + " line " + std::to_string(n) + ": expected two tokens separated by a space");
      m.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    return m;
  }
  std::string vocab_file_, merge_file_;
  byte_level_bpe bpe_;
  std::int64_t eod_, size_;
};

}  // namespace

std::unique_ptr<tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_file, const std::string& merge_file) {
  return std::make_unique<gpt2_bpe_tokenizer>(vocab_file, merge_file);
}

}  // namespace mactor::data
