// Megatron's flags as data/'s inputs: the tokenizer, the GPT dataset config and the samples each
// split needs (declared in model_spec.hpp).
#include <stdexcept>

#include "data/data_args_file.hpp"
#include "data/dataset_request.hpp"
#include "data/dataset_tokenizer.hpp"
#include "training/model_spec.hpp"

namespace mactor::training {
namespace {

data::tokenizer_options tokenizer_options_from_args(const config::megatron_args& a) {
  const auto& t = a.tokenizer;
  data::tokenizer_options o;
  o.tokenizer_type = t.tokenizer_type.value_or("GPT2BPETokenizer");  // validation applied pretrain_gpt's default
  o.vocab_file = t.vocab_file;
  o.merge_file = t.merge_file;
  o.tokenizer_model = t.tokenizer_model;
  o.vocab_size = t.vocab_size;
  o.tiktoken_pattern = t.tiktoken_pattern;
  o.tiktoken_num_special_tokens = t.tiktoken_num_special_tokens;
  o.tiktoken_special_tokens = t.tiktoken_special_tokens;
  o.legacy_tokenizer = t.legacy_tokenizer;
  o.tokenizer_metadata = t.tokenizer_metadata;
  return o;
}

}  // namespace

std::unique_ptr<data::tokenizer> tokenizer_from_args(const config::megatron_args& a) {
  const auto o = tokenizer_options_from_args(a);
  // pretrain_gpt always builds the legacy global tokenizer too (for the padded vocabulary size),
  // and its CustomTikTokenizer asserts a pattern even when the datasets use the default path.
  if (o.tokenizer_type == "TikTokenizer" && !o.tiktoken_pattern)
    throw data::data_error("--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2 (Megatron asserts it)");
  if (o.tokenizer_type == "NullTokenizer" && !o.vocab_size)
    throw data::data_error("--tokenizer-type NullTokenizer needs --vocab-size (e.g. --vocab-size 8192)");
  return data::make_tokenizer(o);
}

data::gpt_dataset_config dataset_config_from_args(const config::megatron_args& a, const data::tokenizer& tok) {
  data::gpt_dataset_config c;
  c.sequence_length = *a.data.seq_length;
  c.random_seed = static_cast<std::uint32_t>(a.initialization.seed);
  c.split = a.data.split;
  if (a.data.data_path && !a.data.data_path->empty()) c.blend = data::blend_from_list(*a.data.data_path);
  if (a.data.data_args_path) c.blend = data::blend_from_list(data::data_args_file_words(*a.data.data_args_path));
  std::array<std::optional<std::vector<std::string>>, 3> per_split = {a.data.train_data_path, a.data.valid_data_path,
                                                                      a.data.test_data_path};
  if (a.data.per_split_data_args_path) per_split = data::per_split_data_args_file(*a.data.per_split_data_args_path);
  for (std::size_t i = 0; i < 3; ++i)
    if (per_split[i] && !per_split[i]->empty()) c.blend_per_split[i] = data::blend_from_list(*per_split[i]);
  c.mock = a.data.mock_data;
  c.reset_position_ids = a.data.reset_position_ids;
  c.reset_attention_mask = a.data.reset_attention_mask;
  c.eod_mask_loss = a.data.eod_mask_loss;
  c.multiple_validation_sets = a.validation.multiple_validation_sets;
  c.create_attention_mask = a.data.create_attention_mask_in_dataloader;
  c.path_to_cache = a.data.data_cache_path;
  c.mid_level_dataset_surplus = a.data.mid_level_dataset_surplus;
  const auto dataset_tok = data::make_dataset_tokenizer(tokenizer_options_from_args(a), tok);
  c.eod = dataset_tok.eod;
  c.pad = dataset_tok.pad;
  c.tokenizer_identifiers = dataset_tok.identifiers;
  c.finalize();
  return c;
}

std::array<std::optional<std::int64_t>, 3> split_sample_counts(const config::megatron_args& a) {
  data::sample_count_args c;
  c.train_samples = a.training.train_samples;
  c.train_iters = a.training.train_iters.value_or(0);
  c.global_batch_size = *a.training.global_batch_size;
  c.eval_interval = a.validation.eval_interval;
  c.eval_iters = a.validation.eval_iters;
  c.full_validation = a.validation.full_validation;
  return data::train_valid_test_num_samples(c);
}

}  // namespace mactor::training
