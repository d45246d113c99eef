// Recording spans while the profile window is open, and the window's opening and closing.
#include "training/trace_recorder.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>

#include "comm/watched_communicator.hpp"
#include "training/trace_file.hpp"

namespace mactor::training {
namespace {

std::int64_t ns_of(trace_recorder::clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

trace_recorder::trace_recorder(profile_plan plan) : plan_(std::move(plan)) {}

trace_recorder::~trace_recorder() {
  if (!active()) return;
  try {
    write_and_stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
}

trace_recorder& no_trace() {
  static trace_recorder off;
  return off;
}

void trace_recorder::begin_iteration(std::int64_t iteration) {
  iteration_.store(iteration, std::memory_order_relaxed);
  if (!plan_.covers(iteration)) return;
  active_.store(true, std::memory_order_relaxed);
}

std::optional<trace_recorder::written> trace_recorder::end_iteration(clock::time_point began, bool last_of_run) {
  if (!active()) return std::nullopt;
  const auto iteration = iteration_.load(std::memory_order_relaxed);
  span("iteration " + std::to_string(iteration), "iteration", began, clock::now(), {}, trace_track::training);
  if (iteration < plan_.last && !last_of_run) return std::nullopt;
  return write_and_stop();
}

void trace_recorder::span(std::string name, const char* category, clock::time_point start, clock::time_point end,
                          std::initializer_list<trace_arg> args, trace_track track) {
  if (!active()) return;
  add(std::move(name), category, start, end, std::span<const trace_arg>(args.begin(), args.size()), track);
}

void trace_recorder::add(std::string name, const char* category, clock::time_point start, clock::time_point end,
                         std::span<const trace_arg> args, trace_track track) {
  trace_event e;
  e.name = std::move(name);
  e.category = category;
  if (track == trace_track::caller)
    track = comm::on_background_thread() ? trace_track::background : trace_track::training;
  e.track = track;
  e.start_ns = ns_of(start);
  e.end_ns = ns_of(end);
  e.iteration = iteration_.load(std::memory_order_relaxed);
  for (const auto& a : args)
    if (e.num_args + 1 < trace_event::max_args) e.args[e.num_args++] = a;
  e.args[e.num_args++] = {"iteration", e.iteration};
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(e));
}

std::size_t trace_recorder::size() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

std::optional<trace_recorder::written> trace_recorder::write_and_stop() {
  active_.store(false, std::memory_order_relaxed);
  std::vector<trace_event> events;
  {
    std::lock_guard lock(mutex_);
    events.swap(events_);
  }
  written w{plan_.file_path(), events.size()};
  write_trace_file(w.path, plan_, events);
  std::printf("profile: rank %d wrote %zu events of iterations %lld-%lld to %s (open it in ui.perfetto.dev or "
              "chrome://tracing)\n",
              plan_.rank, w.events, static_cast<long long>(plan_.first),
              static_cast<long long>(std::min(plan_.last, iteration_.load())), w.path.c_str());
  std::fflush(stdout);
  return w;
}

trace_recorder::scope::scope(trace_recorder& r, const char* name, const char* category,
                             std::initializer_list<trace_arg> args)
    : recorder_(r.active() ? &r : nullptr), name_(name), category_(category) {
  if (!recorder_) return;
  for (const auto& a : args)
    if (num_args_ < args_.size()) args_[num_args_++] = a;
  start_ = clock::now();
}

trace_recorder::scope::~scope() {
  if (recorder_ && recorder_->active())
    recorder_->add(name_, category_, start_, clock::now(), std::span<const trace_arg>(args_.data(), num_args_),
                   trace_track::caller);
}

}  // namespace mactor::training
