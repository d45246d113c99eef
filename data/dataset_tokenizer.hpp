// The tokenizer GPTDataset sees. pretrain_gpt builds two: the legacy one (megatron.training's
// build_tokenizer, always, for the padded vocabulary size) and, unless --legacy-tokenizer, the
// dataset's own from megatron.core.tokenizers (core_gpt_dataset_config_from_args ->
// build_tokenizer), whose library and model class come from --tokenizer-metadata or, without it,
// from --tokenizer-type. The dataset reads three things of it: eod, pad (loss-masked labels and
// padding) and unique_identifiers (hashed into the index cache's file names).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/tokenizer.hpp"

namespace mactor::data {

/// What GPTDataset takes from its tokenizer.
struct dataset_tokenizer {
  std::int64_t eod = 0;
  std::optional<std::int64_t> pad;       ///< nullopt: none (GPTDataset uses -1)
  nlohmann::ordered_json identifiers;    ///< the tokenizer's unique_identifiers
};

/// --tokenizer-metadata's file, as MegatronTokenizer.from_pretrained reads it.
struct tokenizer_metadata {
  std::string library;                   ///< sentencepiece, huggingface, megatron, tiktoken, byte-level, null
  std::string model_type = "default";    ///< default, gpt, mamba, bert, t5, retro: the tokenizer class
};

/// Reads and checks a metadata file; throws data_error naming --tokenizer-metadata and the fix.
tokenizer_metadata read_tokenizer_metadata(const std::string& path);

/// The dataset's tokenizer for these options: `legacy` (the tokenizer --tokenizer-type built)
/// itself under --legacy-tokenizer, else megatron.core.tokenizers' for o.tokenizer_metadata (or
/// the type's own library). Throws data_error where Megatron's build_tokenizer would fail.
dataset_tokenizer make_dataset_tokenizer(const tokenizer_options& o, const tokenizer& legacy);

/// The tokenizer that tokenizes on the path `o` selects, as tools/preprocess_data.py builds it:
/// the legacy one under --legacy-tokenizer, else megatron.core.tokenizers' (the type's own or
/// --tokenizer-metadata's library). Throws data_error as make_dataset_tokenizer does.
std::unique_ptr<tokenizer> make_library_tokenizer(const tokenizer_options& o);

}  // namespace mactor::data
