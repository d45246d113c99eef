// Between nlohmann JSON and pickle values (the saved argparse Namespace and scheduler state), and
// between fp32 arrays and torch tensors of the model's dtype, for the torch checkpoint format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/torch_file.hpp"
#include "tensor/tensor.hpp"

namespace mactor::training {

checkpoint::pickle_value from_json(const nlohmann::json& j);
/// Dicts and objects become JSON objects (text keys only); what JSON cannot hold becomes null.
nlohmann::json to_json(const checkpoint::pickle_value& v);
/// A tensor of `shape` holding v[0, n) in `type` (bf16/fp16 rounded; otherwise fp32).
std::shared_ptr<checkpoint::torch_tensor> make_tensor(const float* v, std::size_t n, std::vector<std::int64_t> shape,
                                                      tensor::dtype type);
/// A tensor's values as fp32 (exact for fp32, bf16, fp16; fp64 rounded), checked against the
/// expected shape; `what` names it in errors (checkpoint_error).
std::vector<float> floats_of(const checkpoint::pickle_value* v, const std::vector<std::int64_t>& shape,
                             const std::string& what);

}  // namespace mactor::training
