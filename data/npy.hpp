// Minimal .npy (format 1.0) writer and reader for the index caches, readable by numpy.load.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mactor::data {

/// One array loaded from a .npy file: its numpy descr ("<i4", ...), shape and raw bytes.
struct npy_array {
  std::string descr;
  std::vector<std::int64_t> shape;
  std::vector<char> bytes;
};

/// Writes `n` items of `item_size` bytes at `data` as an array of numpy type `descr` ("<i4",
/// "<u4", "<i8", "<i2") and `shape`, byte for byte as numpy.save does.
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes);
/// Reads a C-order little-endian .npy; throws data_error naming the file when it is not one.
npy_array read_npy(const std::string& path);

/// A .npy file's payload mapped read-only (shared with every process mapping it; valid while
/// `hold` lives, also after the file is removed), with the descr and shape of its header.
struct npy_mapping {
  npy_array header;  // descr and shape; no bytes
  std::shared_ptr<const void> hold;
  const void* data = nullptr;
  std::size_t bytes = 0;
};
npy_mapping map_npy(const std::string& path);

/// Converts the array's items to int64 (integer descrs only).
std::vector<std::int64_t> npy_to_int64(const npy_array& a, const std::string& path);

}  // namespace mactor::data
