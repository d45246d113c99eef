// bench_comm's reference side: ucx_perftest's server forked, its client read through a pipe,
// parsed into the same rates as mactor's.
#include "bench/comm_perftest.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

#include "tensor/host_buffer.hpp"

namespace mactor::bench {
namespace {

// The memory ucx_perftest allocates: the same kind as mactor's buffers in this run.
std::string perftest_alloc() { return tensor::huge_pages_enabled() ? "UCX_ALLOC_PRIO=thp,heap " : "UCX_ALLOC_PRIO=heap "; }

int perftest_messages(int iters) { return iters + iters / 10 + 1; }  // -n plus -w

}  // namespace

rates perftest_gib_per_s(std::size_t size, int iters, int window, const std::string& wait_mode) {
  const double cpu_start = cpu_seconds(RUSAGE_CHILDREN);
  static int runs = 0;
  const int port = 20000 + static_cast<int>((::getpid() * 7 + runs++) % 20000);
  const std::string common = " -t tag_bw -s " + std::to_string(size) + " -n " +
                             std::to_string(iters) + " -w " + std::to_string(iters / 10 + 1) +
                             " -O " + std::to_string(window) + " -E " + wait_mode + " -p " +
                             std::to_string(port);
  const pid_t server = ::fork();
  if (server == 0) {
    const std::string cmd = "exec env " + perftest_alloc() + "ucx_perftest" + common + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string cmd = perftest_alloc() + "ucx_perftest localhost -f" + common + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  rates bandwidth{-1, -1};
  char line[1024];
  while (p && std::fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::vector<double> numbers;
    double v;
    while (in >> v) numbers.push_back(v);
    if (numbers.size() >= 6) {
      bandwidth.overall = numbers[5] / 1024.0;  // overall MiB/s
      // With a window, perftest's percentile times one post, not one message.
      if (window == 1 && numbers[1] > 0) bandwidth.median = size / (numbers[1] * 1e-6) / (1 << 30);
    }
  }
  if (p) ::pclose(p);
  int status = 0;
  if (::waitpid(server, &status, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(server, SIGKILL);
    ::waitpid(server, &status, 0);
  }
  bandwidth.cpu_us = 1e6 * (cpu_seconds(RUSAGE_CHILDREN) - cpu_start);
  return bandwidth;
}

double perftest_cpu_us_per_message(std::size_t size, int iters, int window) {
  const rates full = perftest_gib_per_s(size, iters, window, "sleep");
  const rates tiny = perftest_gib_per_s(size, 2, window, "sleep");
  if (full.overall <= 0 || tiny.overall <= 0) return -1;
  return (full.cpu_us - tiny.cpu_us) / (perftest_messages(iters) - perftest_messages(2));
}

}  // namespace mactor::bench
