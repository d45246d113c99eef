// bench_comm's mactor side: two ranks of the UCX transport in forked children, measuring p2p
// streams and all-reduces on the parent's command.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "bench/comm_rates.hpp"

namespace mactor::bench {

// The parent's side: both ranks get each command; rank 0's answer comes back.
// Commands, one a line: "p2p SIZE WINDOW ITERS", "ar SIZE ITERS" or "a2a SIZE ITERS".
struct ranks {
  std::FILE* to[2];
  std::FILE* from;
  std::vector<pid_t> pids;

  rates ask(const std::string& command);
};

// Forks the two mactor ranks; each serves the parent's commands. `untouched_send`: rank 0 sends
// from pages it never wrote (--untouched-send).
ranks start_ranks(bool untouched_send, const std::filesystem::path& dir);

// Tells both ranks to quit; returns rank 0's endpoint description, and whether any rank failed.
std::pair<std::string, bool> stop_ranks(ranks& r);

}  // namespace mactor::bench
