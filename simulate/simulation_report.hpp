// The text `mactor simulate` prints: the headline numbers of an iteration, exposed communication
// per process group, and one row per pipeline rank with its bubble and memory.
#pragma once

#include <string>

#include <vector>

#include "simulate/simulation.hpp"
#include "simulate/training_run.hpp"

namespace mactor::simulate {

std::string report_text(const simulation& s);

/// One line per run phase (iterations sharing a global batch) with Megatron's log-line fields,
/// then the run's total simulated time.
std::string run_text(const std::vector<run_phase>& phases);

}  // namespace mactor::simulate
