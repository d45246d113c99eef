// How long a thread waiting on the UCX worker polls before it sleeps: the policy by host and
// setting, and the poll that adapts to the waits a rank has been seeing. No UCX here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace mactor::comm {

/// The poll before a sleep, stretched to the waits this rank has been seeing: a stream of 8 MiB
/// messages completes every ~400 us (~21 GiB/s in the README's bench_comm section), so a 200 us
/// poll ends just before each completion and pays the wake-up anyway. While recent waits (an
/// exponential average) end within max_adaptive_spin, the poll lasts 5/4 of them; longer waits
/// (a pipeline peer computing) get the base poll only. A base of 0 never polls; a fixed setting
/// (MACTOR_UCX_SPIN_US) does not adapt. Thread-safe.
class wait_spin {
 public:
  static constexpr std::chrono::microseconds max_adaptive_spin{2000};
  explicit wait_spin(std::chrono::microseconds base = {}, bool adaptive = false)
      : base_(base), adaptive_(adaptive && base.count() > 0) {}
  wait_spin& operator=(const wait_spin& other);  // the transport sets its own once it knows the host

  /// How long the next wait polls before it sleeps.
  std::chrono::microseconds next() const;
  /// A wait that ended with its operation done after `waited`.
  void record(std::chrono::nanoseconds waited);
  std::chrono::microseconds base() const { return base_; }
  bool adaptive() const { return adaptive_; }

 private:
  std::chrono::microseconds base_;
  bool adaptive_;
  std::atomic<std::int64_t> recent_ns_{0};
};

/// How long a thread in wait_for keeps polling the worker before it sleeps on the event
/// descriptor. A wake-up costs tens of microseconds; a 2 MiB message takes about a hundred. What
/// that is worth comes from one measurement, the README's bench_comm section (2 ranks on 2
/// cores): sleeping at once, mactor reached 76-89% of ucx_perftest at 2-8 MiB; with this poll,
/// 91-155% in the table there. By default it polls default_wait_spin when every rank on this host
/// has a core of its own: while a thread waits the progress thread is parked, so the poller is
/// its rank's one running thread (it yields the core between polls to any other thread that
/// wants it). With more ranks than cores it never polls: the poller would hold a core the rank it
/// waits for needs.
/// `setting`: MACTOR_UCX_SPIN_US (microseconds, 0 = never), which wins and does not adapt.
inline constexpr std::chrono::microseconds default_wait_spin{200};
wait_spin wait_spin_policy(int local_ranks, int cores, const char* setting);

}  // namespace mactor::comm
