// Placeholder until the schedules land: says so instead of printing a made-up schedule.
#include <cstdio>
#include "tools/subcommands.hpp"
int mactor::tools::schedule_main(int, char**) {
  std::fprintf(stderr, "mactor: error: 'mactor schedule' is not implemented yet\n");
  return 2;
}
