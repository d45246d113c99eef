// --straggler-ctrlr-port: the controller Megatron-Core's StragglerDetector runs on rank 0, a small
// HTTP server on 0.0.0.0:PORT. Any request asks to toggle the detector; the toggle takes effect at
// the next log interval's report (StragglerDetector._check_toggle). No token: Megatron's has none.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mactor::inspector {

class straggler_control {
 public:
  /// Listens on 0.0.0.0:`port`; `on`: the detector's state at start (not
  /// --disable-straggler-on-startup). Throws std::runtime_error when the port cannot be bound.
  straggler_control(int port, bool on);
  ~straggler_control();
  straggler_control(const straggler_control&) = delete;
  straggler_control& operator=(const straggler_control&) = delete;

  /// At a report: applies a toggle asked for since the last one; returns true when the state changed.
  bool apply_toggle();
  bool on() const { return on_.load(); }
  /// The lines the request handler logged since the last call ("Will turn StragglerDetector ON at
  /// next logging interval"), for the coordinator to print.
  std::vector<std::string> take_messages();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::atomic<bool> on_;
  std::atomic<bool> toggle_{false};
  std::mutex mu_;
  std::vector<std::string> messages_;
};

}  // namespace mactor::inspector
