// bench_all_to_all's mactor side: N ranks of the UCX transport in forked children on this host,
// measuring the all-to-all-v collective and the MoE dispatch on the parent's command.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace mactor::bench {

// The parent's side: every rank gets each command; rank 0 answers with one line of numbers.
// Commands, one a line:
//   "a2a PER_PEER_BYTES ITERS"  -> GiB/s: bytes each rank sends the other ranks / time
//   "a2a-activations PER_PEER_BYTES ITERS" -> the same from and into activation memory
//   "moe TOKENS HIDDEN EXPERTS TOPK ITERS" -> moe_dispatch_times' milliseconds in order, then
//                                            the MiB sent per dispatch
class all_to_all_ranks {
 public:
  /// Forks `n` ranks that meet through files in `dir`.
  all_to_all_ranks(int n, const std::filesystem::path& dir);
  /// Tells the ranks to quit and reaps them (once; stop() says whether one failed).
  ~all_to_all_ranks();
  all_to_all_ranks(const all_to_all_ranks&) = delete;
  all_to_all_ranks& operator=(const all_to_all_ranks&) = delete;

  /// Rank 0's answer to `command`; exits 1 when a rank died.
  std::vector<double> ask(const std::string& command);
  /// Tells every rank to quit; true when all of them exited cleanly.
  bool stop();

 private:
  std::vector<std::FILE*> to_;
  std::FILE* from_ = nullptr;
  std::vector<pid_t> pids_;
};

}  // namespace mactor::bench
