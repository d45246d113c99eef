// The distributed optimizer's parameter all-gather when some weights are held as fp8
// (--fp8-param-gather): a shard [begin, end) of a chunk's flat layout travels as its runs of
// model values (2 bytes each under bf16) and its runs of fp8 weights (1 byte each), packed into
// one byte payload. The values buffer holds no fp8 weight (the other parameters packed in flat
// order), the fp8 bytes buffer holds the fp8 weights. Megatron keeps the fp8 weights in their
// own uint8 buffer and gathers it beside the bf16 one; the bytes on the wire are the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.hpp"

namespace mactor::training {

/// A weight of a chunk held as fp8: flat elements [offset, offset + numel) live at
/// bytes + byte_offset, one byte each.
struct fp8_weight_place {
  std::size_t offset = 0, numel = 0, byte_offset = 0;
};

/// A run of a shard: flat elements [begin, end), either model values or fp8 bytes, the first
/// at `at` of its buffer (the values' element, or the fp8 byte).
struct gather_run {
  std::size_t begin = 0, end = 0;
  bool fp8 = false;
  std::size_t at = 0;
};

/// The runs of flat range [begin, end) clipped to numel; fp8 sorted by offset, not overlapping.
std::vector<gather_run> gather_runs(std::size_t begin, std::size_t end, std::size_t numel,
                                    std::span<const fp8_weight_place> fp8);
/// The payload bytes of those runs with values of value_size bytes.
std::size_t packed_bytes(std::span<const gather_run> runs, std::size_t value_size);
/// Copies the runs from values and fp8 bytes into out (packed_bytes of them).
void pack_runs(std::span<const gather_run> runs, tensor::const_tensor_view values, const std::uint8_t* fp8,
               std::byte* out);
/// The inverse: the payload back into values and fp8 bytes.
void unpack_runs(std::span<const gather_run> runs, const std::byte* in, tensor::tensor_view values,
                 std::uint8_t* fp8);

}  // namespace mactor::training
