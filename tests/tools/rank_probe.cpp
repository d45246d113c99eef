// Test helper: prints what detect_launch_env finds as one line, then any variables named on the
// command line, so launcher tests can compare mactor, mpirun, srun and torchrun layouts.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/launch_env.hpp"

int main(int argc, char** argv) {
  try {
    auto e = mactor::comm::detect_launch_env(mactor::comm::process_env());
    std::string line = "rank=" + std::to_string(e.rank) + " world=" + std::to_string(e.world_size) +
                       " local_rank=" + std::to_string(e.local_rank) +
                       " local_size=" + std::to_string(e.local_world_size) +
                       " node=" + std::to_string(e.node_rank) +
                       " launcher=" + mactor::comm::launcher_name(e.launcher);
    for (int i = 1; i < argc; ++i) {
      const char* v = std::getenv(argv[i]);
      line += std::string(" ") + argv[i] + "=" + (v ? v : "<unset>");
    }
    line += "\n";
    std::fputs(line.c_str(), stdout);  // one write per rank keeps lines whole
    return 0;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "rank_probe: %s\n", ex.what());
    return 2;
  }
}
