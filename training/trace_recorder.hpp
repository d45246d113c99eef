// The trace of one rank's profiled iterations (--profile, see profile_plan.hpp): spans of work,
// each a name, a start and an end, kept in memory while the window is open and written as a
// Chrome trace-event file (trace_file.hpp) once it closes. The training thread, the background
// collective thread and the pipeline port record into it; outside the window every call is one
// relaxed atomic load and returns, with nothing allocated.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "training/profile_plan.hpp"

namespace mactor::training {

/// Where a span is drawn: the thread that recorded it (the training thread, or the background
/// collective thread that comm::mark_background_thread marks), or the pipeline's sends or
/// receives (which overlap one another).
enum class trace_track : std::uint8_t { caller, training, background, send, recv };

/// A named integer argument of a span (the key is a string literal).
struct trace_arg {
  const char* key = "";
  std::int64_t value = 0;
};

struct trace_event {
  static constexpr std::size_t max_args = 6;
  std::string name;
  const char* category = "";
  trace_track track = trace_track::training;
  std::int64_t start_ns = 0, end_ns = 0;  ///< on the steady clock
  std::int64_t iteration = 0;             ///< the training iteration it belongs to
  std::array<trace_arg, max_args> args{};
  std::size_t num_args = 0;
};

class trace_recorder {
 public:
  using clock = std::chrono::steady_clock;

  /// Off: records nothing, ever.
  trace_recorder() = default;
  explicit trace_recorder(profile_plan plan);
  /// A run that ends inside the window (--exit-interval, a failure) still writes what it has.
  ~trace_recorder();
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;

  /// True while the window is open: callers build a span's name only then.
  bool active() const { return active_.load(std::memory_order_relaxed); }
  const profile_plan& plan() const { return plan_; }

  /// Training iteration `iteration` begins (on the training thread): recording starts when it
  /// is in the window.
  void begin_iteration(std::int64_t iteration);
  /// The iteration begun last has finished: records its span from `began`; after the window's
  /// last iteration, or the run's (`last_of_run`), writes the trace, prints one line saying
  /// where, and stops. Returns the file written and the number of events in it, or nullopt.
  struct written {
    std::string path;
    std::size_t events = 0;
  };
  std::optional<written> end_iteration(clock::time_point began, bool last_of_run);

  /// Records [start, end) while active (any thread); at most trace_event::max_args arguments,
  /// to which the iteration is added.
  void span(std::string name, const char* category, clock::time_point start, clock::time_point end,
            std::initializer_list<trace_arg> args = {}, trace_track track = trace_track::caller);

  /// Records the span of a scope while active; `name` must outlive it (a literal).
  class [[nodiscard]] scope {
   public:
    scope(trace_recorder& r, const char* name, const char* category, std::initializer_list<trace_arg> args = {});
    ~scope();
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    trace_recorder* recorder_;
    const char* name_;
    const char* category_;
    clock::time_point start_;
    std::array<trace_arg, 3> args_{};
    std::size_t num_args_ = 0;
  };

  /// The events recorded so far in this window.
  std::size_t size() const;

 private:
  void add(std::string name, const char* category, clock::time_point start, clock::time_point end,
           std::span<const trace_arg> args, trace_track track);
  std::optional<written> write_and_stop();

  profile_plan plan_;
  std::atomic<bool> active_{false};
  std::atomic<std::int64_t> iteration_{0};
  mutable std::mutex mutex_;
  std::vector<trace_event> events_;
};

/// A recorder that is never active: the trace of parts that are given none.
trace_recorder& no_trace();

}  // namespace mactor::training
