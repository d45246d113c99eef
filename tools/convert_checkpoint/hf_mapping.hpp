// Megatron-Core parameter names and layouts (global, tensor-parallel size 1) <-> Hugging Face
// GPT2LMHeadModel / LlamaForCausalLM state dicts: fused QKV split per query group, SwiGLU fc1
// [gate; up] split, GPT-2's Conv1D transposes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tools/convert_checkpoint/hf_config.hpp"
#include "tools/convert_checkpoint/safetensors.hpp"

namespace mactor::convert {

/// Every parameter mactor's gpt_model registers for these args: name and global shape.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> megatron_parameters(const model_args& a);

/// Megatron tensors (all of megatron_parameters) to the family's Hugging Face names and layouts.
tensor_map megatron_to_hf(const model_args& a, const tensor_map& megatron);
/// The inverse; std::invalid_argument naming a missing or mis-shaped Hugging Face tensor, or a
/// non-zero bias that Megatron's layout cannot hold.
tensor_map hf_to_megatron(const model_args& a, const tensor_map& hf);

}  // namespace mactor::convert
