// Megatron's simulated fault for testing fault tolerance (ft_integration.maybe_setup_simulated_fault):
// with --enable-ft-package and FT_SIM_FAULT_DESC="TYPE;RANK;DELAY" in the environment, one rank
// stops itself (rank_hung: SIGSTOP, a hang for the sections' timeouts to find) or kills itself
// (rank_killed: SIGKILL) after DELAY seconds plus up to 20% more; TYPE random picks one of the
// two, an empty RANK a random rank. The random draws come from the job's id, so every rank draws
// the same rank to fail (Megatron broadcasts rank 0's draw).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mactor::training {

struct simulated_fault {
  std::string type;  ///< rank_hung or rank_killed (random already drawn)
  int rank = 0;      ///< the rank that fails
  double delay_s = 0;
};

/// The fault `description` (FT_SIM_FAULT_DESC's text) asks for; nullopt for an empty one. Throws
/// std::invalid_argument naming the bad part (an unknown type, a rank outside the job, a bad delay).
std::optional<simulated_fault> parse_simulated_fault(const std::string& description, int world_size,
                                                     std::uint64_t seed);

/// On the rank that fails: a detached thread that waits the delay, prints Megatron's
/// "FT: Simulating fault" banner to stdout and stderr, then stops or kills this process.
void arm_simulated_fault(const simulated_fault& fault);

}  // namespace mactor::training
