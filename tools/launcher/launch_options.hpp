// mactor's command line: Open MPI mpirun's options with their meaning, parsed by hand because
// mpirun spells long options with one dash (-np, -host) and stops at the program's name.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mactor::tools {

/// Bad command line; launch_main prints "mactor: error: <what>" and exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One program with its rank count (mpirun's "app context"; ':' separates them).
struct app_context {
  int np = 0;  ///< 0: fill the available slots (only the sole or last context may leave it out)
  std::vector<std::string> argv;
  /// -x VAR=val (value given) or -x VAR (value read from mactor's own environment).
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
};

enum class bind_policy { none, core };

struct launch_options {
  std::vector<app_context> contexts;
  std::vector<std::string> host_lists;  ///< each -H value, "a:2,b:2"
  std::string hostfile;
  int npernode = 0;                     ///< -N / --npernode / --map-by ppr:N:node; 0: by slot
  bool map_by_node = false;             ///< --map-by node: round-robin over hosts
  bind_policy bind = bind_policy::none;
  bool oversubscribe = false;
  bool tag_output = false;
  bool timestamp_output = false;
  std::string output_filename;
  double timeout_s = 0;                 ///< --timeout; 0: none
  double kill_grace_s = 5;              ///< SIGTERM to SIGKILL delay when tearing the job down
  int max_restarts = 0;                 ///< --max-restarts: start a failed job again this many times
  int spares = 0;                       ///< --spares: processes beyond -np that wait to replace a failed rank
  std::string device_memory;            ///< --device-memory as given ("512M"); "": no limit
  std::string ft_section_timeouts;      ///< --ft-param-rank_section_timeouts as given; "": not set
  std::string ft_out_of_section_timeout;  ///< --ft-param-rank_out_of_section_timeout as given
  std::vector<std::string> rsh_agent;   ///< command words; empty: OMPI_MCA_plm_rsh_agent or ssh
  std::string rdzv_host;                ///< address ranks use to reach mactor's store; "": auto
  int rdzv_port = 0;
  std::string remote_mactor;            ///< mactor's path on remote hosts; "": same as here
  bool display_map = false;             ///< print where each rank runs before starting
  bool do_not_launch = false;           ///< map (and display) only
  bool help = false;
  bool version = false;
};

/// Parses argv (argv[0] is the program name). Throws usage_error naming the option and the fix.
launch_options parse_launch_options(int argc, char** argv);

/// `mactor --help`.
std::string launch_help();

/// Splits an agent command like "ip netns exec" into words (whitespace, no quoting).
std::vector<std::string> split_words(const std::string& s);

}  // namespace mactor::tools
