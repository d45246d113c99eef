// A rank's trace as a Chrome trace-event JSON file ("JSON Object Format": {"traceEvents": [...]}),
// what torch.profiler's export_chrome_trace writes and ui.perfetto.dev, chrome://tracing and
// TensorBoard's profiler plugin open: one complete event (ph "X", ts and dur in microseconds
// since the Unix epoch, so the files of several ranks line up) per span, pid the rank, one tid
// per thread, and metadata events (ph "M") naming them. Transfers overlap one another, which a
// thread's spans may not, so the sends and the receives are each spread over as many
// "pipeline send N" / "pipeline recv N" threads as were in flight at once.
#pragma once

#include <span>
#include <string>

#include "training/profile_plan.hpp"
#include "training/trace_recorder.hpp"

namespace mactor::training {

/// The trace's JSON text. `steady_to_epoch_ns` turns the events' steady-clock nanoseconds into
/// nanoseconds since the Unix epoch.
std::string trace_json(const profile_plan& plan, std::span<const trace_event> events, std::int64_t steady_to_epoch_ns);

/// Writes trace_json to `path`; throws checkpoint::checkpoint_error naming the path when it
/// cannot be written.
void write_trace_file(const std::string& path, const profile_plan& plan, std::span<const trace_event> events);

}  // namespace mactor::training
