// Placeholder until the launcher lands: says so instead of pretending to launch.
#include <cstdio>
#include "tools/subcommands.hpp"
int mactor::tools::launch_main(int, char**) {
  std::fprintf(stderr, "mactor: error: the launcher is not implemented yet\n");
  return 2;
}
