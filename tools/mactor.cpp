// The `mactor` program: launches jobs the way mpirun does, and hosts the subcommands.
#include <cstring>

#include "tools/subcommands.hpp"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "schedule") == 0)
    return mactor::tools::schedule_main(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "inspect") == 0)
    return mactor::tools::inspect_main(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "swap") == 0)
    return mactor::tools::swap_main(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "simulate") == 0)
    return mactor::tools::simulate_main(argc - 1, argv + 1);
  return mactor::tools::launch_main(argc, argv);
}
