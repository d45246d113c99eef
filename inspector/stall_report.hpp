// Names the ranks that have waited too long, and what the rank they wait for is doing instead.
#pragma once

#include <string>
#include <vector>

#include "inspector/job_snapshot.hpp"

namespace mactor::inspector {

/// One line for each actor whose activity starts with "awaiting" and has lasted more than
/// threshold_s, e.g. `rank 3 stage waits 12.4 s: awaiting recv_backward mb 7 chunk 1 from rank 12
/// (rank 12 stage is: forward mb 9 chunk 0, for 0.3 s)`. When the activity names a peer ("rank N"), the
/// peer's own activity is added so the stalled pair is named; the peer is the actor of the same
/// kind on that rank, else the first actor on it. Longest waits first.
std::vector<std::string> find_stalls(const job_snapshot& snapshot, double threshold_s);

}  // namespace mactor::inspector
