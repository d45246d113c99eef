// Names and sizes of the element types.
#include "tensor/dtype.hpp"

namespace mactor::tensor {

std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::float32: return 4;
    case dtype::float64: return 8;
    case dtype::bfloat16:
    case dtype::float16: return 2;
    case dtype::float8_e4m3:
    case dtype::float8_e5m2: return 1;
  }
  return 0;
}

std::string_view torch_name(dtype t) {
  switch (t) {
    case dtype::float32: return "torch.float32";
    case dtype::float64: return "torch.float64";
    case dtype::bfloat16: return "torch.bfloat16";
    case dtype::float16: return "torch.float16";
    case dtype::float8_e4m3: return "torch.float8_e4m3fn";
    case dtype::float8_e5m2: return "torch.float8_e5m2";
  }
  return "?";
}

std::string_view short_name(dtype t) {
  switch (t) {
    case dtype::float32: return "fp32";
    case dtype::float64: return "fp64";
    case dtype::bfloat16: return "bf16";
    case dtype::float16: return "fp16";
    case dtype::float8_e4m3: return "fp8_e4m3";
    case dtype::float8_e5m2: return "fp8_e5m2";
  }
  return "?";
}

std::optional<dtype> parse_dtype(std::string_view name) {
  for (auto t : {dtype::float32, dtype::float64, dtype::bfloat16, dtype::float16, dtype::float8_e4m3,
                 dtype::float8_e5m2})
    if (name == short_name(t) || name == torch_name(t)) return t;
  return std::nullopt;
}

bool is_floating_point8(dtype t) { return t == dtype::float8_e4m3 || t == dtype::float8_e5m2; }

bool is_half_precision(dtype t) { return t == dtype::bfloat16 || t == dtype::float16; }

std::string to_string(const device& d) {
  return d.type == device_type::cpu ? std::string("cpu") : "cuda:" + std::to_string(d.index);
}

}  // namespace mactor::tensor
