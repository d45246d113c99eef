// SentencePiece tokenizers through libsentencepiece: GPTSentencePieceTokenizer (plain ids) and
// Llama2Tokenizer (BOS first with --legacy-tokenizer). Both use eos as eod and the model's pad id.
#include <sentencepiece_processor.h>

#include "data/data_error.hpp"
#include "data/tokenizer.hpp"

namespace mactor::data {
namespace {

class sentencepiece_tokenizer : public tokenizer {
 public:
  sentencepiece_tokenizer(const std::string& model_file, bool add_bos, const char* cls)
      : model_file_(model_file), add_bos_(add_bos), cls_(cls) {
    auto st = sp_.Load(model_file);
    if (!st.ok())
      throw data_error("--tokenizer-model=" + model_file + ": cannot load the SentencePiece model (" +
                       st.ToString() + ")");
  }
  std::vector<std::int64_t> tokenize(std::string_view text) const override {
    std::vector<int> ids;
    auto st = sp_.Encode(absl::string_view(text.data(), text.size()), &ids);
    if (!st.ok()) throw data_error("SentencePiece encode failed: " + st.ToString());
    std::vector<std::int64_t> out;
    if (add_bos_) out.push_back(sp_.bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }
  std::string detokenize(const std::vector<std::int64_t>& ids) const override {
    std::vector<int> v(ids.begin(), ids.end());
    std::string out;
    auto st = sp_.Decode(v, &out);
    if (!st.ok()) throw data_error("SentencePiece decode failed: " + st.ToString());
    return out;
  }
  std::int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  std::int64_t eod() const override { return sp_.eos_id(); }
  std::optional<std::int64_t> pad() const override { return sp_.pad_id(); }
  nlohmann::ordered_json unique_identifiers() const override {
    nlohmann::ordered_json j;
    j["class"] = cls_;
    j["tokenizer_path"] = {model_file_};
    j["vocab_extra_ids"] = "0";
    return j;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  std::string model_file_;
  bool add_bos_;
  std::string cls_;
};

}  // namespace

std::unique_ptr<tokenizer> make_gpt_sentencepiece_tokenizer(const std::string& model_file) {
  return std::make_unique<sentencepiece_tokenizer>(model_file, false, "_GPTSentencePieceTokenizer");
}

std::unique_ptr<tokenizer> make_llama2_tokenizer(const std::string& model_file, bool bos_first) {
  return std::make_unique<sentencepiece_tokenizer>(model_file, bos_first, "_Llama2Tokenizer");
}

}  // namespace mactor::data
