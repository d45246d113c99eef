// A transfer run on a thread of its own while the caller computes, and timed: how long it took on
// its thread, and how long the caller still waited for it once its own work was done (the part
// the compute did not hide). A MoE layer's all-to-all behind its delayed weight gradients uses
// it; ring attention's shifts are driven between tiles instead (ring_attention.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <future>

#include "tensor/default_device.hpp"

namespace mactor::model {

/// Summed over the transfers of a pass (or a run).
struct transfer_timing {
  double wait_s = 0;      ///< the caller waiting after its compute
  double transfer_s = 0;  ///< the transfers themselves, on their thread
  int transfers = 0;
};

class timed_transfer {
 public:
  using clock = std::chrono::steady_clock;

  static double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

  /// Starts `transfer` on its own thread, under the caller's default device (the buffers it
  /// makes go beside the model's); it must outlive nothing the caller frees before wait().
  timed_transfer(std::function<void()> transfer, transfer_timing& timing)
      : timing_(timing),
        done_(std::async(std::launch::async, [transfer = std::move(transfer), where = tensor::default_device()] {
          const tensor::default_device_scope on_device(where);
          const auto start = clock::now();
          transfer();
          return seconds_since(start);
        })) {}

  /// Returns once the transfer is done (rethrowing what it threw) and counts the wait.
  void wait() {
    const auto start = clock::now();
    timing_.transfer_s += done_.get();
    timing_.wait_s += seconds_since(start);
    ++timing_.transfers;
  }

 private:
  transfer_timing& timing_;
  std::future<double> done_;
};

}  // namespace mactor::model
