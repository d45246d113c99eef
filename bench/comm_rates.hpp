// bench_comm's measurements: what one round of a stream yields, for mactor's ranks and for
// ucx_perftest alike, and the CPU clock both are charged by.
#pragma once

#include <sys/resource.h>

namespace mactor::bench {

struct rates {
  double overall = 0;  // bytes / wall time of the whole stream
  double median = 0;   // window 1: size / the median time between completions
  double cpu_us = -1;  // CPU time of both sides per message (user + system, every thread)
  double worst_overall = -1, worst_median = -1;  // the worst round's, where several ran
};

// `who`: RUSAGE_SELF or RUSAGE_CHILDREN.
inline double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace mactor::bench
