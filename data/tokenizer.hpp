// The tokenizer interface the data layer and preprocess_data use, and Megatron's tokenizer types:
// GPT2BPETokenizer, HuggingFaceTokenizer (tokenizer.json, BPE), GPTSentencePieceTokenizer,
// Llama2Tokenizer, TikTokenizer and NullTokenizer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mactor::data {

/// What Megatron's tokenizers offer to data code.
class tokenizer {
 public:
  virtual ~tokenizer() = default;
  virtual std::vector<std::int64_t> tokenize(std::string_view text) const = 0;
  virtual std::string detokenize(const std::vector<std::int64_t>& ids) const = 0;
  /// The vocabulary size Megatron reports (before --make-vocab-size-divisible-by padding).
  virtual std::int64_t vocab_size() const = 0;
  virtual std::int64_t eod() const = 0;
  /// The pad id; nullopt where Megatron's tokenizer has none (GPTDataset then uses -1).
  virtual std::optional<std::int64_t> pad() const = 0;
  /// The legacy MegatronTokenizer unique_identifiers (class, tokenizer_path, options).
  virtual nlohmann::ordered_json unique_identifiers() const = 0;
};

/// GPT-2 byte-level BPE from vocab.json and merges.txt; eod = <|endoftext|>.
std::unique_ptr<tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_file,
                                                   const std::string& merge_file);
/// A HuggingFace tokenizer.json of model type BPE with a byte-level pre-tokenizer; added tokens
/// are matched literally. eod is <|endoftext|>, </s> or the eos named in `eos_token` if given.
/// `template_tokens`: the post-processor's special tokens (a BOS, say) around each text, as the
/// legacy class's tokenizer(text).input_ids adds them (--legacy-tokenizer); megatron.core.tokenizers'
/// library, Megatron's default path, adds none.
std::unique_ptr<tokenizer> make_huggingface_tokenizer(const std::string& tokenizer_json,
                                                      std::optional<std::string> eos_token = {},
                                                      bool template_tokens = true);
/// GPTSentencePieceTokenizer: encode_as_ids; eod = eos_id, pad = pad_id.
std::unique_ptr<tokenizer> make_gpt_sentencepiece_tokenizer(const std::string& model_file);
/// Llama2Tokenizer: eod = eos_id, pad = pad_id. BOS + encode as the legacy class tokenizes
/// (--legacy-tokenizer); megatron.core.tokenizers' sentencepiece library, Megatron's default
/// path, encodes without the BOS.
std::unique_ptr<tokenizer> make_llama2_tokenizer(const std::string& model_file, bool bos_first = true);
/// NullTokenizer: text is space-separated ids; eod = vocab_size, reported vocab_size + 1.
std::unique_ptr<tokenizer> make_null_tokenizer(std::int64_t vocab_size);
/// megatron.core.tokenizers' ByteLevelTokenizer with its defaults: each UTF-8 byte is its id,
/// vocabulary 512, eod 0, pad 1.
std::unique_ptr<tokenizer> make_byte_level_tokenizer();

/// The options preprocess_data and training pass (Megatron's flag names).
struct tokenizer_options {
  std::string tokenizer_type;  // --tokenizer-type
  std::optional<std::string> vocab_file, merge_file, tokenizer_model;
  std::optional<std::int64_t> vocab_size;
  std::optional<std::string> tiktoken_pattern;                  // --tiktoken-pattern v1|v2
  std::int64_t tiktoken_num_special_tokens = 1000;              // --tiktoken-num-special-tokens
  std::optional<std::vector<std::string>> tiktoken_special_tokens;  // --tiktoken-special-tokens
  bool legacy_tokenizer = false;                                // --legacy-tokenizer
  std::optional<std::string> tokenizer_metadata;                // --tokenizer-metadata (data/dataset_tokenizer.hpp)
};
/// TikTokenizer from Megatron's tiktoken vocabulary JSON (see tiktoken_tokenizer.cpp for the
/// two Megatron code paths --legacy-tokenizer chooses between).
std::unique_ptr<tokenizer> make_tiktokenizer(const tokenizer_options& o);
/// Builds the tokenizer `o.tokenizer_type` names; throws data_error naming the missing flag.
std::unique_ptr<tokenizer> make_tokenizer(const tokenizer_options& o);

}  // namespace mactor::data
