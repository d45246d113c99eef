// --exit-signal-handler: an async-signal-safe flag set by SIGTERM.
#include "training/exit_signal.hpp"

#include <signal.h>

#include <atomic>

namespace mactor::training {
namespace {

std::atomic<bool> received{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");

void on_exit_signal(int) { received.store(true, std::memory_order_relaxed); }

}  // namespace

void install_exit_signal_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_exit_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the transports' blocking calls go on undisturbed
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool exit_signal_received() { return received.load(std::memory_order_relaxed); }

}  // namespace mactor::training
