// One entry point for every schedule: pick the coroutine for a shape, and drive it through a port.
#pragma once

#include <concepts>
#include <utility>

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// The schedule coroutine for one rank: resolved_kind(s) picks no_pipelining, one_f_one_b,
/// interleaved_one_f_one_b or gpipe. Throws std::invalid_argument with every message of
/// validate(s) when the shape breaks a rule; check validate(s) first to report them nicely.
generator<action> make_schedule(schedule_shape s);

/// A port that finishes each action before it returns (the trace port, a virtual-time
/// simulator). See README.md for the contract every port, synchronous or not, honours.
template <class Port>
concept synchronous_port = requires(Port& port, const action& a) { port.execute(a); };

/// Pulls every action of `schedule` and hands it to `port` in order.
template <synchronous_port Port>
void run_schedule(generator<action> schedule, Port& port) {
  while (auto a = schedule.next()) port.execute(*a);
}

}  // namespace mactor::schedules
