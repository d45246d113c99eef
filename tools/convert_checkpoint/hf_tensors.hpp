// Row-major tensor reshuffles and name helpers shared by the per-architecture Hugging Face
// mappings (hf_mapping.cpp, hf_mla_mapping.cpp, hf_moe_mapping.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tools/convert_checkpoint/hf_config.hpp"
#include "tools/convert_checkpoint/safetensors.hpp"

namespace mactor::convert {

using shape_t = std::vector<std::int64_t>;
using parameter_list = std::vector<std::pair<std::string, shape_t>>;
/// A Megatron tensor by name (its shape checked against megatron_parameters).
using megatron_getter = std::function<const dense_tensor&(const std::string&)>;
/// A Hugging Face tensor by name and expected shape.
using hf_getter = std::function<const dense_tensor&(const std::string&, const shape_t&)>;

/// "decoder.layers.<i>." (Megatron) and "model.layers.<i>." (Hugging Face).
std::string layer(int i);
std::string hf_layer(int i);
dense_tensor transpose(const dense_tensor& t);  // [r, c] -> [c, r]
/// Rows [begin, end) of a [rows, cols] (or [rows]) tensor.
dense_tensor rows(const dense_tensor& t, std::int64_t begin, std::int64_t end);
dense_tensor concat_rows(const std::vector<const dense_tensor*>& parts);
dense_tensor zeros(std::int64_t n);
/// m[name] with the given shape; std::invalid_argument naming `where` when missing or mis-shaped.
const dense_tensor& need(const tensor_map& m, const std::string& name, const shape_t& shape, const char* where);
/// std::invalid_argument when t has a non-zero element (a bias the Megatron model lacks).
void require_zero(const dense_tensor& t, const std::string& name);
/// A MoE layer's expert weight: SequentialMLP's local_experts.<e>.linear_fc<n>.weight or, under
/// --moe-grouped-gemm, TEGroupedMLP's experts.linear_fc<n>.weight<e>.
std::string expert_weight(const model_args& a, const std::string& layer_prefix, int expert, int fc);

}  // namespace mactor::convert
