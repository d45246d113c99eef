// The simulated timeline as a Chrome trace-event file, the format mactor's --profile writes
// (training/trace_file.hpp): {"traceEvents": [...]}, one complete event (ph "X", ts and dur in
// microseconds) per span, pid = pipeline rank, one tid per lane, metadata events naming them.
// Opens in ui.perfetto.dev and chrome://tracing.
#pragma once

#include <span>
#include <string>

#include "simulate/virtual_clock_port.hpp"

namespace mactor::simulate {

std::string timeline_json(std::span<const timeline_span> spans);

/// Writes timeline_json to `path`; throws std::runtime_error naming the path when it cannot.
void write_timeline(const std::string& path, std::span<const timeline_span> spans);

}  // namespace mactor::simulate
