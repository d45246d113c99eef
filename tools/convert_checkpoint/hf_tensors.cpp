// Row-major tensor reshuffles and name helpers of the Hugging Face mappings.
#include "tools/convert_checkpoint/hf_tensors.hpp"

#include <algorithm>
#include <stdexcept>

namespace mactor::convert {

std::string layer(int i) { return "decoder.layers." + std::to_string(i) + "."; }
std::string hf_layer(int i) { return "model.layers." + std::to_string(i) + "."; }

dense_tensor transpose(const dense_tensor& t) {
  const std::int64_t r = t.shape[0], c = t.shape[1];
  dense_tensor out{{c, r}, std::vector<float>(t.data.size())};
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) out.data[j * r + i] = t.data[i * c + j];
  return out;
}

dense_tensor rows(const dense_tensor& t, std::int64_t begin, std::int64_t end) {
  const std::int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
  dense_tensor out{t.shape, {t.data.begin() + begin * cols, t.data.begin() + end * cols}};
  out.shape[0] = end - begin;
  return out;
}

dense_tensor concat_rows(const std::vector<const dense_tensor*>& parts) {
  dense_tensor out{parts[0]->shape, {}};
  out.shape[0] = 0;
  for (const auto* p : parts) {
    out.shape[0] += p->shape[0];
    out.data.insert(out.data.end(), p->data.begin(), p->data.end());
  }
  return out;
}

dense_tensor zeros(std::int64_t n) { return {{n}, std::vector<float>(std::size_t(n), 0.0f)}; }

const dense_tensor& need(const tensor_map& m, const std::string& name, const shape_t& shape,
                         const char* where) {
  auto it = m.find(name);
  if (it == m.end())
    throw std::invalid_argument(std::string(where) + " has no tensor " + name +
                                "; is the model config right for these weights?");
  if (it->second.shape != shape) {
    std::string s;
    for (auto d : it->second.shape) s += " " + std::to_string(d);
    throw std::invalid_argument(std::string(where) + ": tensor " + name + " has shape [" + s +
                                " ] which does not match the model config");
  }
  return it->second;
}

void require_zero(const dense_tensor& t, const std::string& name) {
  if (std::any_of(t.data.begin(), t.data.end(), [](float x) { return x != 0.0f; }))
    throw std::invalid_argument(name + " is non-zero, but the Megatron model has no such bias "
                                       "(add_bias_linear is off)");
}

std::string expert_weight(const model_args& a, const std::string& layer_prefix, int expert, int fc) {
  const std::string experts = layer_prefix + "mlp.experts.", linear = "linear_fc" + std::to_string(fc);
  return a.moe_grouped_gemm ? experts + linear + ".weight" + std::to_string(expert)
                            : experts + "local_experts." + std::to_string(expert) + "." + linear + ".weight";
}

}  // namespace mactor::convert
