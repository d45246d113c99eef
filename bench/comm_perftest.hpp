// bench_comm's reference: `ucx_perftest -t tag_bw` run as a server and a client on localhost,
// allocating the same kind of memory as mactor's buffers in this run.
#pragma once

#include <cstddef>
#include <string>

#include "bench/comm_rates.hpp"

namespace mactor::bench {

// Runs ucx_perftest tag_bw server and client on localhost; returns the client's overall
// bandwidth in GiB/s (perftest's "MB/s" are MiB/s) and size / its 50th-percentile time per
// message, or -1s when it could not run. cpu_us: here the CPU time of the whole run (both
// processes, start-up included), for perftest_cpu_us_per_message. `wait_mode`: "poll" or "sleep".
rates perftest_gib_per_s(std::size_t size, int iters, int window, const std::string& wait_mode);

// perftest -E sleep's CPU time per message: a full run less a 2-message run (start-up, connection).
double perftest_cpu_us_per_message(std::size_t size, int iters, int window);

}  // namespace mactor::bench
