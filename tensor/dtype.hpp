// The element types a tensor can hold and the devices it can live on. fp32 trains today, fp64
// serves gradient checks; bf16, fp16 and the two fp8 formats are the mixed-precision types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mactor::tensor {

enum class dtype : std::uint8_t { float32, float64, bfloat16, float16, float8_e4m3, float8_e5m2 };

/// Bytes per element.
std::size_t size_of(dtype t);
/// PyTorch's name ("torch.float32", "torch.bfloat16", "torch.float8_e4m3fn", ...), as Megatron prints it.
std::string_view torch_name(dtype t);
/// Megatron's flag spelling ("fp32", "bf16", "fp16", "fp8"), or the torch name for the others.
std::string_view short_name(dtype t);
/// "fp32", "bf16", "fp16", "fp64", "fp8_e4m3", "fp8_e5m2" and the torch names; nullopt otherwise.
std::optional<dtype> parse_dtype(std::string_view name);
bool is_floating_point8(dtype t);
/// bf16 or fp16: the 16-bit types, stored in 16 bits and computed on in fp32.
bool is_half_precision(dtype t);

enum class device_type : std::uint8_t { cpu, cuda };

/// Where a tensor's bytes are: host memory, or the memory of CUDA device `index`.
struct device {
  device_type type = device_type::cpu;
  int index = 0;
  friend bool operator==(const device&, const device&) = default;
};
inline constexpr device cpu{};
/// "cpu" or "cuda:N".
std::string to_string(const device& d);

}  // namespace mactor::tensor
