// Megatron's indexed dataset: a memory-mapped reader and a builder for the `.bin`/`.idx` pair,
// byte-compatible with megatron/core/datasets/indexed_dataset.py (layout in data_format.md §1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/data_error.hpp"

namespace mactor::data {

/// Token dtype codes of the `.idx` header (numpy dtype in the comment).
enum class dtype : std::uint8_t {
  uint8 = 1,    // numpy.uint8
  int8 = 2,     // numpy.int8
  int16 = 3,    // numpy.int16
  int32 = 4,    // numpy.int32
  int64 = 5,    // numpy.int64
  float64 = 6,  // numpy.float64
  float32 = 7,  // numpy.float32
  uint16 = 8,   // numpy.uint16
};

/// Bytes per item of `t`.
std::size_t dtype_size(dtype t);
/// numpy's name for `t` ("uint16", ...).
const char* dtype_name(dtype t);
/// The dtype for a code read from a file; nullopt when the code is not one of 1..8.
std::optional<dtype> dtype_from_code(int code);
/// DType.optimal_dtype: uint16 when the vocabulary is known and < 65500, else int32.
dtype optimal_dtype(std::optional<std::int64_t> vocab_size);

/// `prefix + ".idx"` and `prefix + ".bin"`.
std::string idx_path(const std::string& prefix);
std::string bin_path(const std::string& prefix);

/// Read-only view of a `.bin`/`.idx` pair; both files are memory-mapped.
class indexed_dataset {
 public:
  /// Opens `prefix.idx` and `prefix.bin`; throws data_error naming the file and byte offset when
  /// either is truncated or not a Megatron indexed dataset. `multimodal` also reads sequence modes.
  explicit indexed_dataset(std::string path_prefix, bool multimodal = false);
  ~indexed_dataset();
  indexed_dataset(indexed_dataset&& other) noexcept;
  indexed_dataset& operator=(indexed_dataset&& other) noexcept;
  indexed_dataset(const indexed_dataset&) = delete;
  indexed_dataset& operator=(const indexed_dataset&) = delete;

  const std::string& path_prefix() const { return prefix_; }
  data::dtype token_dtype() const { return dtype_; }
  /// S: the number of sequences.
  std::size_t size() const { return lengths_.size(); }
  /// Tokens per sequence (int32, as in the file).
  const std::vector<std::int32_t>& sequence_lengths() const { return lengths_; }
  /// Byte offset of sequence i in `.bin`.
  std::int64_t sequence_pointer(std::size_t i) const;
  /// The document_indices array (S+1 entries without sentence splitting).
  const std::vector<std::int64_t>& document_indices() const { return doc_indices_; }
  /// Per-sequence modes (multimodal only; empty otherwise).
  const std::vector<std::int8_t>& sequence_modes() const { return modes_; }

  /// Tokens of sequence i from `offset`, `length` of them (default: to the end), widened to int64.
  std::vector<std::int64_t> get(std::size_t i, std::int64_t offset = 0,
                                std::optional<std::int64_t> length = std::nullopt) const;
  /// Same as get() but appends into `out` (no allocation when `out` has capacity).
  void append_tokens(std::size_t i, std::int64_t offset, std::int64_t length,
                     std::vector<std::int64_t>& out) const;
  /// The raw `.bin` bytes.
  std::span<const std::byte> bin_bytes() const { return {bin_, bin_size_}; }

 private:
  void close() noexcept;
  std::string prefix_;
  data::dtype dtype_ = dtype::int32;
  std::vector<std::int32_t> lengths_;
  std::vector<std::int64_t> doc_indices_;
  std::vector<std::int8_t> modes_;
  const std::byte* idx_ = nullptr;  // mmap of .idx
  std::size_t idx_size_ = 0;
  const std::byte* bin_ = nullptr;  // mmap of .bin
  std::size_t bin_size_ = 0;
  std::size_t pointers_offset_ = 0;  // byte offset of sequence_pointers in .idx
};

/// Writes a `.bin` as items arrive and the `.idx` on finalize (IndexedDatasetBuilder).
class indexed_dataset_builder {
 public:
  /// Opens `bin_path` for writing; tokens are stored as `t` (Megatron's default is int32).
  explicit indexed_dataset_builder(std::string bin_path, dtype t = dtype::int32,
                                   bool multimodal = false);
  ~indexed_dataset_builder();
  indexed_dataset_builder(const indexed_dataset_builder&) = delete;
  indexed_dataset_builder& operator=(const indexed_dataset_builder&) = delete;

  /// Appends one sequence (values are converted to the dtype as numpy.array(..., dtype) does).
  void add_item(std::span<const std::int64_t> tokens, std::int8_t mode = 0);
  /// Appends a whole document made of sequences of `lengths`, then closes the document.
  void add_document(std::span<const std::int64_t> tokens, std::span<const std::int32_t> lengths,
                    std::span<const std::int8_t> modes = {});
  /// Closes the current document (after add_item calls).
  void end_document();
  /// Appends a whole existing dataset `prefix` (same dtype required): its sequences, documents
  /// and `.bin` bytes.
  void add_index(const std::string& prefix);
  /// Closes `.bin` and writes the index to `idx_path`.
  void finalize(const std::string& idx_path);

  std::size_t sequence_count() const { return lengths_.size(); }
  std::uint64_t bytes_written() const { return bytes_written_; }

 private:
  void write_bytes(const void* p, std::size_t n);
  std::string bin_path_;
  dtype dtype_;
  bool multimodal_;
  std::FILE* bin_ = nullptr;
  std::vector<std::int32_t> lengths_;
  std::vector<std::int64_t> doc_indices_{0};
  std::vector<std::int8_t> modes_;
  std::vector<std::byte> scratch_;
  std::uint64_t bytes_written_ = 0;
};

}  // namespace mactor::data
