// Reader and builder of Megatron's .bin/.idx pair (layout in data_format.md §1).
#include "data/indexed_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <tuple>
#include <utility>

namespace mactor::data {
namespace {

constexpr unsigned char magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr std::size_t header_size = 34;

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Maps `path` read-only; an empty file gives {nullptr, 0}.
std::pair<const std::byte*, std::size_t> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw data_error(path + ": cannot open (" + std::strerror(errno) +
                     "); check the dataset prefix (the path without .bin/.idx)");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw data_error(path + ": cannot stat (" + std::strerror(errno) + ")");
  }
  auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return {nullptr, 0};
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw data_error(path + ": mmap failed (" + std::strerror(errno) + ")");
  return {static_cast<const std::byte*>(p), size};
}

std::string at(const std::string& path, std::size_t offset) {
  return path + " at byte offset " + std::to_string(offset);
}

template <typename T>
void store_as(std::int64_t v, std::byte* out) {
  T t = static_cast<T>(v);
  std::memcpy(out, &t, sizeof(T));
}

template <typename T>
std::int64_t load_as(const std::byte* p) {
  return static_cast<std::int64_t>(load<T>(p));
}

}  // namespace

std::size_t dtype_size(dtype t) {
  switch (t) {
    case dtype::uint8: case dtype::int8: return 1;
    case dtype::int16: case dtype::uint16: return 2;
    case dtype::int32: case dtype::float32: return 4;
    case dtype::int64: case dtype::float64: return 8;
  }
  return 0;
}

const char* dtype_name(dtype t) {
  switch (t) {
    case dtype::uint8: return "uint8";
    case dtype::int8: return "int8";
    case dtype::int16: return "int16";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::float64: return "float64";
    case dtype::float32: return "float32";
    case dtype::uint16: return "uint16";
  }
  return "?";
}

std::optional<dtype> dtype_from_code(int code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<dtype>(code);
}

dtype optimal_dtype(std::optional<std::int64_t> vocab_size) {
  return (vocab_size && *vocab_size < 65500) ? dtype::uint16 : dtype::int32;
}

std::string idx_path(const std::string& prefix) { return prefix + ".idx"; }
std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }

// ---------------------------------------------------------------------------------------------
// Reader

indexed_dataset::indexed_dataset(std::string path_prefix, bool multimodal)
    : prefix_(std::move(path_prefix)) {
  const std::string ip = idx_path(prefix_);
  std::tie(idx_, idx_size_) = map_file(ip);
  try {
    if (idx_size_ < header_size)
      throw data_error(ip + ": truncated .idx: the header needs 34 bytes but the file ends at byte offset " +
                       std::to_string(idx_size_) + "; rewrite it with preprocess_data");
    if (std::memcmp(idx_, magic, sizeof magic) != 0)
      throw data_error(at(ip, 0) + ": bad magic (expected \"MMIDIDX\\x00\\x00\"): not a Megatron "
                       "indexed dataset index; pass the prefix of a file written by preprocess_data");
    auto version = load<std::uint64_t>(idx_ + 9);
    if (version != 1)
      throw data_error(at(ip, 9) + ": index version " + std::to_string(version) +
                       " is not supported (only version 1 is)");
    auto code = static_cast<int>(load<std::uint8_t>(idx_ + 17));
    auto t = dtype_from_code(code);
    if (!t)
      throw data_error(at(ip, 17) + ": unknown dtype code " + std::to_string(code) +
                       " (valid codes are 1..8)");
    dtype_ = *t;
    auto s = load<std::uint64_t>(idx_ + 18);
    auto d = load<std::uint64_t>(idx_ + 26);
    // Sizes come from the file: check them against the file size before multiplying.
    const std::uint64_t room = idx_size_ - header_size;
    if (s > room / 12 || d > (room - 12 * s) / 8)
      throw data_error(at(ip, 18) + ": truncated .idx: the header declares " + std::to_string(s) +
                       " sequences and " + std::to_string(d) +
                       " document indices, which do not fit before the file ends at byte offset " +
                       std::to_string(idx_size_) + "; regenerate the dataset");
    const std::size_t lengths_at = header_size, docs_at = header_size + 12 * s;
    pointers_offset_ = header_size + 4 * s;
    std::size_t need = docs_at + 8 * d + (multimodal ? s : 0);
    if (need > idx_size_)
      throw data_error(ip + ": truncated .idx: expected " + std::to_string(need) +
                       " bytes but the file ends at byte offset " + std::to_string(idx_size_));
    lengths_.resize(s);
    if (s) std::memcpy(lengths_.data(), idx_ + lengths_at, 4 * s);
    doc_indices_.resize(d);
    if (d) std::memcpy(doc_indices_.data(), idx_ + docs_at, 8 * d);
    if (multimodal) {
      modes_.resize(s);
      if (s) std::memcpy(modes_.data(), idx_ + docs_at + 8 * d, s);
    }
    if (d == 0 || doc_indices_.back() != static_cast<std::int64_t>(s))
      throw data_error(at(ip, docs_at + 8 * (d ? d - 1 : 0)) +
                       ": the last document index must equal the sequence count " +
                       std::to_string(s) + "; the index is corrupt or not a GPT indexed dataset");
    const std::string bp = bin_path(prefix_);
    std::tie(bin_, bin_size_) = map_file(bp);
    if (s) {
      const std::size_t item = dtype_size(dtype_);
      std::int64_t last_ptr = sequence_pointer(s - 1);
      std::uint64_t end = static_cast<std::uint64_t>(last_ptr) +
                          static_cast<std::uint64_t>(lengths_[s - 1]) * item;
      if (last_ptr < 0 || end > bin_size_)
        throw data_error(bp + ": truncated .bin: the index says sequence " + std::to_string(s - 1) +
                         " ends at byte offset " + std::to_string(end) +
                         " but the file ends at byte offset " + std::to_string(bin_size_) +
                         "; regenerate the dataset");
    }
  } catch (...) {
    close();
    throw;
  }
}

indexed_dataset::~indexed_dataset() { close(); }

indexed_dataset::indexed_dataset(indexed_dataset&& o) noexcept
    : prefix_(std::move(o.prefix_)),
      dtype_(o.dtype_),
      lengths_(std::move(o.lengths_)),
      doc_indices_(std::move(o.doc_indices_)),
      modes_(std::move(o.modes_)),
      idx_(std::exchange(o.idx_, nullptr)),
      idx_size_(std::exchange(o.idx_size_, 0)),
      bin_(std::exchange(o.bin_, nullptr)),
      bin_size_(std::exchange(o.bin_size_, 0)),
      pointers_offset_(o.pointers_offset_) {}

indexed_dataset& indexed_dataset::operator=(indexed_dataset&& o) noexcept {
  if (this != &o) {
    close();
    prefix_ = std::move(o.prefix_);
    dtype_ = o.dtype_;
    lengths_ = std::move(o.lengths_);
    doc_indices_ = std::move(o.doc_indices_);
    modes_ = std::move(o.modes_);
    idx_ = std::exchange(o.idx_, nullptr);
    idx_size_ = std::exchange(o.idx_size_, 0);
    bin_ = std::exchange(o.bin_, nullptr);
    bin_size_ = std::exchange(o.bin_size_, 0);
    pointers_offset_ = o.pointers_offset_;
  }
  return *this;
}

void indexed_dataset::close() noexcept {
  if (idx_) ::munmap(const_cast<std::byte*>(idx_), idx_size_);
  if (bin_) ::munmap(const_cast<std::byte*>(bin_), bin_size_);
  idx_ = bin_ = nullptr;
  idx_size_ = bin_size_ = 0;
}

std::int64_t indexed_dataset::sequence_pointer(std::size_t i) const {
  return load<std::int64_t>(idx_ + pointers_offset_ + 8 * i);
}

std::vector<std::int64_t> indexed_dataset::get(std::size_t i, std::int64_t offset,
                                               std::optional<std::int64_t> length) const {
  if (i >= size())
    throw data_error(prefix_ + ": sequence " + std::to_string(i) + " is out of range (the dataset has " +
                     std::to_string(size()) + ")");
  std::int64_t len = length ? *length : lengths_[i] - offset;
  std::vector<std::int64_t> out;
  append_tokens(i, offset, len, out);
  return out;
}

void indexed_dataset::append_tokens(std::size_t i, std::int64_t offset, std::int64_t length,
                                    std::vector<std::int64_t>& out) const {
  if (offset < 0 || length < 0 || offset + length > lengths_.at(i))
    throw data_error(prefix_ + ": read of tokens [" + std::to_string(offset) + ", " +
                     std::to_string(offset + length) + ") is outside sequence " + std::to_string(i) +
                     " of length " + std::to_string(lengths_[i]));
  const std::size_t item = dtype_size(dtype_);
  const std::byte* p = bin_ + sequence_pointer(i) + offset * static_cast<std::int64_t>(item);
  const std::size_t n0 = out.size();
  out.resize(n0 + static_cast<std::size_t>(length));
  std::int64_t* o = out.data() + n0;
  for (std::int64_t k = 0; k < length; ++k, p += item) {
    switch (dtype_) {
      case dtype::uint8: o[k] = load_as<std::uint8_t>(p); break;
      case dtype::int8: o[k] = load_as<std::int8_t>(p); break;
      case dtype::int16: o[k] = load_as<std::int16_t>(p); break;
      case dtype::uint16: o[k] = load_as<std::uint16_t>(p); break;
      case dtype::int32: o[k] = load_as<std::int32_t>(p); break;
      case dtype::int64: o[k] = load_as<std::int64_t>(p); break;
      case dtype::float32: o[k] = static_cast<std::int64_t>(load<float>(p)); break;
      case dtype::float64: o[k] = static_cast<std::int64_t>(load<double>(p)); break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Builder

indexed_dataset_builder::indexed_dataset_builder(std::string bin_path, dtype t, bool multimodal)
    : bin_path_(std::move(bin_path)), dtype_(t), multimodal_(multimodal) {
  bin_ = std::fopen(bin_path_.c_str(), "wb");
  if (!bin_)
    throw data_error(bin_path_ + ": cannot open for writing (" + std::strerror(errno) +
                     "); check that the output directory exists");
}

indexed_dataset_builder::~indexed_dataset_builder() {
  if (bin_) std::fclose(bin_);
}

void indexed_dataset_builder::write_bytes(const void* p, std::size_t n) {
  if (n && std::fwrite(p, 1, n, bin_) != n)
    throw data_error(bin_path_ + ": write failed at byte offset " + std::to_string(bytes_written_) +
                     " (" + std::strerror(errno) + "); is the disk full?");
  bytes_written_ += n;
}

void indexed_dataset_builder::add_item(std::span<const std::int64_t> tokens, std::int8_t mode) {
  if (!bin_) throw data_error(bin_path_ + ": add_item after finalize");
  const std::size_t item = dtype_size(dtype_);
  scratch_.resize(tokens.size() * item);
  std::byte* out = scratch_.data();
  for (std::size_t k = 0; k < tokens.size(); ++k, out += item) {
    const std::int64_t v = tokens[k];
    switch (dtype_) {
      case dtype::uint8: store_as<std::uint8_t>(v, out); break;
      case dtype::int8: store_as<std::int8_t>(v, out); break;
      case dtype::int16: store_as<std::int16_t>(v, out); break;
      case dtype::uint16: store_as<std::uint16_t>(v, out); break;
      case dtype::int32: store_as<std::int32_t>(v, out); break;
      case dtype::int64: store_as<std::int64_t>(v, out); break;
      case dtype::float32: { float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
      case dtype::float64: { double f = static_cast<double>(v); std::memcpy(out, &f, 8); break; }
    }
  }
  write_bytes(scratch_.data(), scratch_.size());
  lengths_.push_back(static_cast<std::int32_t>(tokens.size()));
  if (multimodal_) modes_.push_back(mode);
}

void indexed_dataset_builder::add_document(std::span<const std::int64_t> tokens,
                                           std::span<const std::int32_t> lengths,
                                           std::span<const std::int8_t> modes) {
  std::int64_t total = 0;
  for (auto l : lengths) total += l;
  if (total != static_cast<std::int64_t>(tokens.size()))
    throw data_error(bin_path_ + ": add_document got " + std::to_string(tokens.size()) +
                     " tokens but the lengths sum to " + std::to_string(total));
  std::size_t at = 0;
  for (std::size_t k = 0; k < lengths.size(); ++k) {
    add_item(tokens.subspan(at, static_cast<std::size_t>(lengths[k])),
             k < modes.size() ? modes[k] : std::int8_t{0});
    at += static_cast<std::size_t>(lengths[k]);
  }
  end_document();
}

void indexed_dataset_builder::end_document() {
  doc_indices_.push_back(static_cast<std::int64_t>(lengths_.size()));
}

void indexed_dataset_builder::add_index(const std::string& prefix) {
  indexed_dataset other(prefix, multimodal_);
  if (other.token_dtype() != dtype_)
    throw data_error(idx_path(prefix) + ": dtype " + dtype_name(other.token_dtype()) +
                     " differs from this builder's " + dtype_name(dtype_) +
                     "; merge only datasets written with the same dtype");
  const auto base = static_cast<std::int64_t>(lengths_.size());
  lengths_.insert(lengths_.end(), other.sequence_lengths().begin(), other.sequence_lengths().end());
  const auto& docs = other.document_indices();
  for (std::size_t k = 1; k < docs.size(); ++k) doc_indices_.push_back(base + docs[k]);
  if (multimodal_)
    modes_.insert(modes_.end(), other.sequence_modes().begin(), other.sequence_modes().end());
  auto bytes = other.bin_bytes();
  write_bytes(bytes.data(), bytes.size());
}

void indexed_dataset_builder::finalize(const std::string& idx_file) {
  if (bin_ && std::fclose(bin_) != 0)
    throw data_error(bin_path_ + ": close failed (" + std::strerror(errno) + ")");
  bin_ = nullptr;
  std::FILE* f = std::fopen(idx_file.c_str(), "wb");
  if (!f) throw data_error(idx_file + ": cannot open for writing (" + std::strerror(errno) + ")");
  const std::uint64_t s = lengths_.size(), d = doc_indices_.size(), version = 1;
  const auto code = static_cast<std::uint8_t>(dtype_);
  std::vector<std::int64_t> pointers(s);
  const auto item = static_cast<std::int64_t>(dtype_size(dtype_));
  std::int64_t ptr = 0;
  for (std::size_t i = 0; i < s; ++i) {
    pointers[i] = ptr;
    ptr += lengths_[i] * item;
  }
  bool ok = std::fwrite(magic, 1, 9, f) == 9 && std::fwrite(&version, 8, 1, f) == 1 &&
            std::fwrite(&code, 1, 1, f) == 1 && std::fwrite(&s, 8, 1, f) == 1 &&
            std::fwrite(&d, 8, 1, f) == 1 &&
            (s == 0 || std::fwrite(lengths_.data(), 4, s, f) == s) &&
            (s == 0 || std::fwrite(pointers.data(), 8, s, f) == s) &&
            std::fwrite(doc_indices_.data(), 8, d, f) == d &&
            (!multimodal_ || s == 0 || std::fwrite(modes_.data(), 1, s, f) == s);
  if (std::fclose(f) != 0) ok = false;
  if (!ok) throw data_error(idx_file + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace mactor::data
