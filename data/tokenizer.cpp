// make_tokenizer: picks the tokenizer --tokenizer-type names and checks its files were given.
#include "data/tokenizer.hpp"

#include "data/data_error.hpp"

namespace mactor::data {
namespace {

const std::string& need(const std::optional<std::string>& v, const char* flag, const std::string& type) {
  if (!v || v->empty())
    throw data_error(std::string(flag) + " is required with --tokenizer-type " + type);
  return *v;
}

}  // namespace

std::unique_ptr<tokenizer> make_tokenizer(const tokenizer_options& o) {
  const auto& t = o.tokenizer_type;
  if (t == "GPT2BPETokenizer") {
    const auto& vocab = need(o.vocab_file, "--vocab-file", t);
    return make_gpt2_bpe_tokenizer(vocab, need(o.merge_file, "--merge-file", t));
  }
  if (t == "HuggingFaceTokenizer")
    return make_huggingface_tokenizer(need(o.tokenizer_model, "--tokenizer-model", t), std::nullopt,
                                      /*template_tokens=*/o.legacy_tokenizer);
  if (t == "GPTSentencePieceTokenizer")
    return make_gpt_sentencepiece_tokenizer(need(o.tokenizer_model, "--tokenizer-model", t));
  if (t == "Llama2Tokenizer")
    return make_llama2_tokenizer(need(o.tokenizer_model, "--tokenizer-model", t), /*bos_first=*/o.legacy_tokenizer);
  if (t == "TikTokenizer") return make_tiktokenizer(o);
  if (t == "NullTokenizer") {
    if (!o.vocab_size) throw data_error("--vocab-size is required with --tokenizer-type NullTokenizer");
    return make_null_tokenizer(*o.vocab_size);
  }
  throw data_error("--tokenizer-type " + (t.empty() ? std::string("(none)") : t) +
                   " is not supported by mactor yet; use GPT2BPETokenizer, HuggingFaceTokenizer, "
                   "GPTSentencePieceTokenizer, Llama2Tokenizer, TikTokenizer or NullTokenizer");
}

}  // namespace mactor::data
