// One optimizer state tensor kept in a storage dtype smaller than fp32, as Transformer Engine's
// FusedAdam keeps it for Megatron's --use-precision-aware-optimizer (--exp-avg-dtype,
// --exp-avg-sq-dtype, --main-params-dtype): bf16 plain, fp16 with a per-tensor scale, fp8 (E4M3,
// stored as uint8) with a per-tensor scale. The update itself always runs on an fp32 copy: load,
// widen (and unscale), update, then rescale and round back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tensor/memory_ledger.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

enum class state_dtype { fp32, fp16, bf16, fp8 };

/// Megatron's spelling ("fp32", "bf16", "fp16", "fp8") or the torch dtype validation maps it to
/// ("float32", "bfloat16", "float16", "uint8").
std::optional<state_dtype> parse_state_dtype(std::string_view text);
std::string_view to_string(state_dtype t);
/// Bytes per element of the storage.
std::size_t element_bytes(state_dtype t);

/// fp8 E4M3 (TE's kFloat8E4M3, torch.float8_e4m3fn): nearest-even, saturated to +-448.
std::uint8_t to_e4m3(float x);
float from_e4m3(std::uint8_t code);

class scaled_state {
 public:
  explicit scaled_state(state_dtype type = state_dtype::fp32) : type_(type) {}
  /// A copy holds its own elements (on the same device).
  scaled_state(const scaled_state& other);
  scaled_state& operator=(const scaled_state& other);
  scaled_state(scaled_state&&) noexcept = default;
  scaled_state& operator=(scaled_state&&) noexcept = default;

  state_dtype type() const { return type_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// n zeros with scale 1 (FusedAdam's initialize_state for exp_avg and exp_avg_sq), on `where`:
  /// on a device fp32, bf16 and fp16 states (fp8 throws tensor_error naming the flags).
  void zero(std::size_t n, tensor::device where = tensor::cpu);
  /// FusedAdam's get_unscaled_state: the fp32 values (stored * scale for fp16, code * scale_inv
  /// for fp8, widened for bf16, as is for fp32), on the host wherever the state is. out.size()
  /// must be size().
  void unscale(std::span<float> out) const;
  /// FusedAdam's set_scaled_state / _apply_scale: fp16 takes scale = absmax / (65504 / 2) and
  /// stores round(x / scale); fp8 takes scale = absmax / 448 and stores round(x * (1 / scale))
  /// with scale_inv = 1 / (1 / scale); bf16 rounds; fp32 copies (to the state's device).
  /// Resizes to values.size().
  void set(std::span<const float> values);
  /// The fp32 storage itself in host memory (fp32 states update in place, with no copy); null
  /// otherwise, and for a state on a device.
  float* fp32_data() { return type_ == state_dtype::fp32 && !device_.defined() ? f32_.data() : nullptr; }
  /// The fp32 storage, on the host or its device; an empty view for other dtypes or no elements.
  tensor::tensor_view fp32_view();
  /// A state on a device: its storage (fp32, bf16 or fp16) there; an empty view on the host.
  tensor::tensor_view device_view() { return device_.defined() ? device_.view() : tensor::tensor_view{}; }
  /// A state on a device, with the device's kernels: its fp32 values into `wide` (fp32, size()
  /// elements, on the state's device), as unscale() makes them; and back from `wide` (which it
  /// overwrites as scratch), rescaled and rounded as set() stores them.
  void widen_into(tensor::tensor_view wide) const;
  void round_from(tensor::tensor_view wide);
  /// Bytes of the stored elements (the one fp32 scale per tensor is not counted).
  std::size_t bytes() const { return size_ * element_bytes(type_); }

 private:
  state_dtype type_;
  std::size_t size_ = 0;
  std::vector<float> f32_;
  std::vector<std::uint16_t> h16_;  // bf16 or fp16 bits
  std::vector<std::uint8_t> f8_;    // E4M3 codes
  float scale_ = 1.0f;              // fp16: unscaled = stored * scale_; fp8: the scale_inv
  tensor::tensor device_;           // an fp32 or bf16 state on a device (then the vectors are empty)
  // The stored elements, in the device's ledger (an optimizer's state is device memory).
  tensor::counted_bytes counted_{tensor::memory_kind::optimizer_state};
};

}  // namespace mactor::model
