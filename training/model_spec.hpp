// Megatron's args to the plain descriptions that model/, data/ and the optimizer take: model_spec.cpp
// builds the model's, data_spec.cpp the data's, optimizer_spec.cpp the optimizer's.
#pragma once
#include <optional>

#include <cstdint>
#include <memory>

#include "config/megatron_args.hpp"
#include "data/gpt_dataset.hpp"
#include "data/tokenizer.hpp"
#include "model/gpt_model_config.hpp"
#include "model/lr_scheduler.hpp"
#include "model/grad_scaler.hpp"
#include "model/optimizer.hpp"

namespace mactor::training {

/// The GPT that core_transformer_config_from_args describes, for tensor-parallel rank tp_rank
/// context-parallel rank cp_rank, expert-parallel rank ep_rank and expert-tensor-parallel rank etp_rank.
model::gpt_model_config model_config_from_args(const config::megatron_args& a, std::int64_t padded_vocab_size,
                                               int tp_rank = 0, int cp_rank = 0, int ep_rank = 0, int etp_rank = 0);
/// --recompute-granularity, --recompute-method, --recompute-num-layers, --recompute-modules and
/// --distribute-saved-activations, after validation.
model::recompute_config recompute_from_args(const config::megatron_args& a);

/// The tokenizer --tokenizer-type names (throws data::data_error naming a missing file or flag).
std::unique_ptr<data::tokenizer> tokenizer_from_args(const config::megatron_args& a);

/// GPTDatasetConfig as Megatron's pretrain_gpt builds it from args and the tokenizer.
data::gpt_dataset_config dataset_config_from_args(const config::megatron_args& a, const data::tokenizer& tok);

/// Samples wanted per split (train, valid, test), as get_train_valid_test_num_samples computes them.
std::array<std::optional<std::int64_t>, 3> split_sample_counts(const config::megatron_args& a);

model::optimizer_options optimizer_options_from_args(const config::megatron_args& a);
/// Megatron's loss scaler: constant with --loss-scale (fp16 or bf16), dynamic under --fp16
/// otherwise (--initial-loss-scale, --min-loss-scale, --loss-scale-window, --hysteresis); none
/// for fp32 and for bf16 without --loss-scale.
std::optional<model::grad_scaler_options> grad_scaler_options_from_args(const config::megatron_args& a);
model::lr_schedule_args lr_schedule_args_from_args(const config::megatron_args& a);

}  // namespace mactor::training
