// Which host runs which rank: hosts and slots from -H / --hostfile, then Open MPI's mappings
// (by slot, by node, N per node) over the ranks of every app context in order.
#pragma once

#include <string>
#include <vector>

#include "tools/launcher/launch_options.hpp"

namespace mactor::tools {

struct host_entry {
  std::string name;
  int slots = 1;
};

/// "a:2,b:2,c" -> {a,2},{b,2},{c,1}; a name given twice adds its slots. Throws usage_error.
std::vector<host_entry> parse_host_list(const std::string& list);
/// Hostfile lines "name [slots=N] [max_slots=M]", '#' comments; no slots= means `default_slots`
/// (1, as Open MPI uses for a host whose cores it has not counted).
std::vector<host_entry> parse_hostfile(const std::string& path, int default_slots);

struct rank_placement {
  int rank = 0;
  int context = 0;  ///< index into launch_options::contexts
  int host = 0;     ///< index into job_layout::hosts
  int local_rank = 0;
};

struct job_layout {
  std::vector<host_entry> hosts;
  std::vector<rank_placement> ranks;  ///< indexed by rank
  std::vector<int> local_size;        ///< per host
  std::vector<int> node_rank;         ///< per host: index among hosts that run ranks, or -1
  /// The job's ranks: the first world_size() places; the rest hold spare processes
  /// (`mactor --spares`, --inprocess-active-world-size).
  int world_size() const { return active < 0 ? static_cast<int>(ranks.size()) : active; }
  int processes() const { return static_cast<int>(ranks.size()); }
  int active = -1;  ///< -1: every place is a rank
};

/// "rank R on HOST (local rank L of S, node N, app C)" lines, one per rank.
std::string describe_map(const job_layout& layout);

/// Places every rank; `cores` is the slot count of the implicit local host. Fills in each
/// context's np when it was left out. Throws usage_error when the ranks do not fit the slots.
job_layout map_ranks(launch_options& opts, int cores);

}  // namespace mactor::tools
