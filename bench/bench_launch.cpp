// Launch-to-all-ranks-ready time of `mactor`: from starting mactor until every rank has joined the
// rendezvous store and passed a barrier, and until mactor has exited, for 2, 8 and 32 local ranks;
// Open MPI's mpirun starting the same ranks (rank 0 then hosts the store) is the reference.
// usage: bench_launch [--ranks 2,8,32] [--repeats 5] [--no-mpirun]   (ranks run this program)
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "comm/launch_env.hpp"
#include "comm/rendezvous.hpp"

namespace {

// CLOCK_MONOTONIC is one clock for every process on the machine, so ranks can stamp it.
long long now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int rank_main() {
  using namespace mactor::comm;
  auto env = detect_launch_env(process_env());
  auto rdzv = open_rendezvous(env, std::chrono::seconds(60));
  rdzv.client->barrier("ready", env.rank, env.world_size, std::chrono::seconds(60));
  if (env.rank == 0) std::printf("ready_ns %lld\n", now_ns());
  return 0;
}

struct sample {
  double ready_ms, exit_ms;
};

sample run_once(const std::string& launcher, const std::string& self, int n) {
  std::string cmd = launcher + " -np " + std::to_string(n) + " --oversubscribe " + self + " --rank-mode";
  long long t0 = now_ns();
  FILE* p = ::popen(cmd.c_str(), "r");
  long long ready = 0;
  char line[256];
  while (p && std::fgets(line, sizeof line, p))
    if (std::sscanf(line, "ready_ns %lld", &ready) == 1) continue;
  int rc = p ? ::pclose(p) : -1;
  long long t1 = now_ns();
  if (rc != 0 || ready == 0) {
    std::fprintf(stderr, "bench_launch: '%s' failed (status %d)\n", cmd.c_str(), rc);
    std::exit(1);
  }
  return {(ready - t0) / 1e6, (t1 - t0) / 1e6};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {2, 8, 32};
  int repeats = 5;
  bool with_mpirun = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rank-mode") return rank_main();
    if (a == "--no-mpirun") {
      with_mpirun = false;
      continue;
    }
    if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--ranks" && i + 1 < argc) {
      sizes.clear();
      std::stringstream in(argv[++i]);
      for (std::string s; std::getline(in, s, ',');) sizes.push_back(std::atoi(s.c_str()));
    } else {
      std::fprintf(stderr, "usage: bench_launch [--ranks 2,8,32] [--repeats 5] [--no-mpirun]\n");
      return 2;
    }
  }
  auto self = std::filesystem::read_symlink("/proc/self/exe");
  std::string mactor = (self.parent_path() / "mactor").string();
  std::printf("mactor launch: start to all ranks past a rendezvous barrier, and to mactor's exit\n");
  std::printf("(%d runs each, %u cores)\n", repeats, std::max(1u, static_cast<unsigned>(::sysconf(_SC_NPROCESSORS_ONLN))));
  std::printf("%-8s %6s  %12s  %12s  %12s  %12s\n", "launcher", "ranks", "ready median", "ready min",
              "ready max", "exit median");
  std::vector<std::pair<std::string, std::string>> launchers = {{"mactor", mactor}};
  if (with_mpirun) launchers.push_back({"mpirun", "mpirun --allow-run-as-root"});
  for (int n : sizes) {
    for (auto& [name, cmd] : launchers) {
      std::vector<double> ready, exit;
      for (int k = 0; k < repeats; ++k) {
        auto s = run_once(cmd, self.string(), n);
        ready.push_back(s.ready_ms);
        exit.push_back(s.exit_ms);
      }
      std::sort(ready.begin(), ready.end());
      std::sort(exit.begin(), exit.end());
      std::printf("%-8s %6d  %9.1f ms  %9.1f ms  %9.1f ms  %9.1f ms\n", name.c_str(), n,
                  ready[ready.size() / 2], ready.front(), ready.back(), exit[exit.size() / 2]);
    }
  }
  return 0;
}
