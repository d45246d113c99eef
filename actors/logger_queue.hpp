// The bound on the logger's mailbox. The coordinator never waits for the logger (a slow terminal,
// a stalled pipe or a slow TensorBoard disk must not slow training), so the bound is kept by
// not sending: once the logger has `capacity` messages waiting, iteration records are left out
// and counted, and when it has caught up the log says which iterations are missing.
// Validation blocks, checkpoint lines and timers are rare and always sent.
//   MACTOR_LOGGER_QUEUE   messages the logger may have waiting (default 1000)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mactor::actors {

class logger_queue {
 public:
  static constexpr std::int64_t default_capacity = 1000;
  explicit logger_queue(std::int64_t capacity = default_capacity) : capacity_(capacity) {}
  /// From MACTOR_LOGGER_QUEUE; throws std::invalid_argument naming it when it is not a positive integer.
  static logger_queue from_env();

  std::int64_t capacity() const { return capacity_; }
  /// Counts a message sent to the logger.
  void sent() { ++sent_; }
  /// Messages sent and not yet handled, given how many the logger has handled.
  std::int64_t waiting(std::int64_t handled) const { return sent_ - handled; }

  /// Whether iteration `iteration`'s record may be sent now (after a gap: with the notice, so
  /// both must fit). A refusal is counted; the first of a run of refusals returns the line to
  /// print on the job's stderr at once (in `started`).
  bool admit(std::int64_t iteration, std::int64_t handled, std::optional<std::string>* started = nullptr);
  /// The log line naming the iterations left out since the last notice (nullopt when none).
  std::optional<std::string> take_notice();
  /// Iteration records left out over the whole job.
  std::int64_t dropped_total() const { return dropped_total_; }

 private:
  std::int64_t capacity_;
  std::int64_t sent_ = 0;
  std::int64_t dropped_ = 0, first_ = 0, last_ = 0, dropped_total_ = 0;
};

}  // namespace mactor::actors
