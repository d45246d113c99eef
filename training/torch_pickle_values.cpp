// JSON and tensors in and out of pickle values.
#include "training/torch_pickle_values.hpp"

#include <cstring>

#include "checkpoint/checkpoint_error.hpp"
#include "tensor/half_float.hpp"

namespace mactor::training {

using checkpoint::checkpoint_error;
using checkpoint::pickle_value;
using checkpoint::torch_tensor;
using json = nlohmann::json;
using kind = pickle_value::kind;

pickle_value from_json(const json& j) {
  if (j.is_null()) return pickle_value::none();
  if (j.is_boolean()) return pickle_value::boolean(j.get<bool>());
  if (j.is_number_integer()) return pickle_value::integer(j.get<std::int64_t>());
  if (j.is_number()) return pickle_value::real(j.get<double>());
  if (j.is_string()) return pickle_value::text(j.get<std::string>());
  if (j.is_array()) {
    auto l = pickle_value::list();
    for (const auto& x : j) l.items.push_back(from_json(x));
    return l;
  }
  auto d = pickle_value::dict();
  for (const auto& [k, v] : j.items()) d.set(k, from_json(v));
  return d;
}

json to_json(const pickle_value& v) {
  switch (v.k) {
    case kind::boolean: return v.b;
    case kind::integer: return v.i;
    case kind::real: return v.d;
    case kind::text: return v.s;
    case kind::list:
    case kind::tuple: {
      json a = json::array();
      for (const auto& x : v.items) a.push_back(to_json(x));
      return a;
    }
    case kind::dict:
    case kind::object: {
      json o = json::object();
      for (const auto& [k, x] : v.entries)
        if (k.k == kind::text) o[k.s] = to_json(x);
      return o;
    }
    default: return nullptr;
  }
}

std::shared_ptr<torch_tensor> make_tensor(const float* v, std::size_t n, std::vector<std::int64_t> shape,
                                          tensor::dtype type) {
  auto t = std::make_shared<torch_tensor>();
  t->shape = std::move(shape);
  if (type == tensor::dtype::bfloat16 || type == tensor::dtype::float16) {
    const bool bf = type == tensor::dtype::bfloat16;
    t->dtype = checkpoint::dtype_by_name(bf ? "bfloat16" : "float16");
    t->bytes.resize(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t bits = bf ? tensor::to_bfloat16(v[i]).bits : tensor::to_float16(v[i]).bits;
      std::memcpy(t->bytes.data() + 2 * i, &bits, 2);
    }
  } else {
    t->dtype = checkpoint::dtype_by_name("float32");
    t->bytes.assign(reinterpret_cast<const char*>(v), n * sizeof(float));
  }
  return t;
}

// A tensor's values as fp32 (exact for fp32, bf16, fp16), checked against the expected shape.
std::vector<float> floats_of(const pickle_value* v, const std::vector<std::int64_t>& shape, const std::string& what) {
  if (!v || v->k != kind::tensor) throw checkpoint_error(what + " is missing or not a tensor");
  const torch_tensor& t = *v->tensor;
  if (t.shape != shape) {
    auto text = [](const std::vector<std::int64_t>& s) {
      std::string r = "[";
      for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
      return r + "]";
    };
    throw checkpoint_error(what + " has shape " + text(t.shape) + " but this rank's tensor is " + text(shape) +
                           "; the checkpoint was saved by a different model: use the flags it was saved with");
  }
  const std::string dt = t.dtype->name;
  std::vector<float> out(t.bytes.size() / t.dtype->item_size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char* p = t.bytes.data() + i * t.dtype->item_size;
    if (dt == "float32") std::memcpy(&out[i], p, 4);
    else if (dt == "bfloat16" || dt == "float16") {
      std::uint16_t bits;
      std::memcpy(&bits, p, 2);
      out[i] = dt == "bfloat16" ? tensor::to_float(tensor::bfloat16{bits}) : tensor::to_float(tensor::float16{bits});
    } else if (dt == "float64") {
      double d;
      std::memcpy(&d, p, 8);
      out[i] = static_cast<float>(d);
    } else {
      throw checkpoint_error(what + " is " + dt + ", not a floating-point tensor");
    }
  }
  return out;
}

}  // namespace mactor::training
