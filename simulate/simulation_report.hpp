// The text `mactor simulate` prints: the headline numbers of an iteration, exposed communication
// per process group, and one row per pipeline rank with its bubble and memory.
#pragma once

#include <string>

#include "simulate/simulation.hpp"

namespace mactor::simulate {

std::string report_text(const simulation& s);

}  // namespace mactor::simulate
