// What memory holds, by kind: every tensor's bytes are counted under the kind its owner gave it
// (parameters, gradients, optimizer state, activations, communication buffers), with a peak per
// kind, so a rank can say where its memory went (--log-memory-to-tensorboard, the inspector).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mactor::tensor {

enum class memory_kind : std::uint8_t { parameters, gradients, optimizer_state, activations, communication, other };
inline constexpr int num_memory_kinds = 6;
/// "parameters", "gradients", "optimizer state", "activations", "communication", "other".
std::string_view name(memory_kind k);

struct memory_usage {
  std::int64_t current = 0;  ///< bytes held now
  std::int64_t peak = 0;     ///< most bytes held at once since the last reset_peaks()
};

/// An allocation past the device's memory (memory_ledger::set_limit), as a GPU's would fail:
/// the message names what was asked for, what is held by kind, and the limit.
class out_of_memory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Byte counts of one device's memory, by kind. Thread-safe; tensors update it as they are
/// allocated and freed.
class memory_ledger {
 public:
  /// The ledger of this process's host memory.
  static memory_ledger& host();

  /// Counts `bytes` more of kind k; with a limit set, throws out_of_memory (counting nothing)
  /// when the total would pass it.
  void allocated(memory_kind k, std::int64_t bytes);
  void freed(memory_kind k, std::int64_t bytes);
  memory_usage usage(memory_kind k) const;
  /// All kinds together (its peak is the peak of the sum, not the sum of the peaks).
  memory_usage total() const;
  /// Peaks restart from what is held now.
  void reset_peaks();
  /// The device's memory in bytes (0: no limit), and what sets it (named in the error).
  void set_limit(std::int64_t bytes, std::string source);
  std::int64_t limit() const { return limit_.load(std::memory_order_relaxed); }

 private:
  [[noreturn]] void refuse(memory_kind k, std::int64_t bytes, std::int64_t held) const;
  struct counter {
    std::atomic<std::int64_t> current{0}, peak{0};
  };
  static void raise_peak(counter& c, std::int64_t now);
  std::array<counter, num_memory_kinds> kinds_;
  counter total_;
  std::atomic<std::int64_t> limit_{0};
  std::string limit_source_;
};

/// Bytes held outside tensors (an optimizer's state vectors) counted in the host ledger as kind
/// k while this lives: set(n) counts n (throwing out_of_memory before anything is allocated
/// when the limit would pass). A copy counts its bytes again.
class counted_bytes {
 public:
  explicit counted_bytes(memory_kind k) : kind_(k) {}
  counted_bytes(const counted_bytes& o) : kind_(o.kind_) { set(o.bytes_); }
  counted_bytes& operator=(const counted_bytes& o) {
    if (this != &o) set(o.bytes_);
    return *this;
  }
  ~counted_bytes() { set(0); }
  void set(std::int64_t bytes);
  std::int64_t bytes() const { return bytes_; }

 private:
  memory_kind kind_;
  std::int64_t bytes_ = 0;
};

/// MiB with two decimals ("12.50 MiB").
std::string mebibytes(std::int64_t bytes);

}  // namespace mactor::tensor
