// What memory holds, by kind: every tensor's bytes are counted under the kind its owner gave it
// (parameters, gradients, optimizer state, activations, communication buffers), with a peak per
// kind, so a rank can say where its memory went (--log-memory-to-tensorboard, the inspector).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
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

/// Byte counts of one device's memory, by kind. Thread-safe; tensors update it as they are
/// allocated and freed.
class memory_ledger {
 public:
  /// The ledger of this process's host memory.
  static memory_ledger& host();

  void allocated(memory_kind k, std::int64_t bytes);
  void freed(memory_kind k, std::int64_t bytes);
  memory_usage usage(memory_kind k) const;
  /// All kinds together (its peak is the peak of the sum, not the sum of the peaks).
  memory_usage total() const;
  /// Peaks restart from what is held now.
  void reset_peaks();

 private:
  struct counter {
    std::atomic<std::int64_t> current{0}, peak{0};
  };
  static void raise_peak(counter& c, std::int64_t now);
  std::array<counter, num_memory_kinds> kinds_;
  counter total_;
};

}  // namespace mactor::tensor
