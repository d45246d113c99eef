// The per-layer parts of the DeepseekV3 and Qwen3-MoE mappings: multi-latent attention
// (hf_mla_mapping.cpp) and the MLP block of a layer, dense or MoE (hf_moe_mapping.cpp). Each comes
// as its Megatron parameter list, Megatron -> Hugging Face and back; l is the Megatron layer
// prefix ("decoder.layers.<i>."), o the Hugging Face one ("model.layers.<i>.").
#pragma once
#include <string>

#include "tools/convert_checkpoint/hf_tensors.hpp"

namespace mactor::convert {

void mla_parameters(const model_args& a, const std::string& l, parameter_list& p);
void mla_to_hf(const model_args& a, const std::string& l, const std::string& o, const megatron_getter& get,
               tensor_map& hf);
void mla_from_hf(const model_args& a, const std::string& l, const std::string& o, const hf_getter& get,
                 tensor_map& m);

/// Layer i's MLP: dense (linear_fc1/fc2 <-> gate/up/down_proj) or MoE (router, experts, and for
/// DeepseekV3 the shared experts and the expert bias).
void mlp_block_parameters(const model_args& a, int i, parameter_list& p);
void mlp_block_to_hf(const model_args& a, int i, const megatron_getter& get, tensor_map& hf);
void mlp_block_from_hf(const model_args& a, int i, const hf_getter& get, tensor_map& m);

}  // namespace mactor::convert
