// The safetensors file format, written and read by hand: 8-byte little-endian header size, a JSON
// header {name: {dtype, shape, data_offsets}} and the raw little-endian tensor bytes.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mactor::convert {

/// A dense row-major fp32 tensor.
struct dense_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

using tensor_map = std::map<std::string, dense_tensor>;

/// Writes every tensor as F32 (names sorted, as the map orders them) with {"format": "pt"}
/// metadata. Throws std::runtime_error naming the path on I/O failure.
void write_safetensors(const std::string& path, const tensor_map& tensors);
/// Reads F32, F16 and BF16 tensors (converted to fp32). Throws std::runtime_error naming the path
/// and the problem for anything malformed or of another dtype.
tensor_map read_safetensors(const std::string& path);

}  // namespace mactor::convert
