// Data-plane benchmark: p2p and all-reduce bandwidth of the UCX transport between two
// processes on this machine, printed next to `ucx_perftest -t tag_bw` run by this program.
// Each number is the best of --repeats runs (the machine may be shared). The window is how
// many messages may be in flight; ucx_perftest gets the same as -O so both stream alike.
// Usage: bench_comm [--iters-scale X] [--repeats N] [--no-perftest]
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives.hpp"
#include "comm/file_address_exchange.hpp"
#include "comm/ucx_transport.hpp"

using namespace mactor::comm;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t mib = 1 << 20;
const std::vector<std::size_t> sizes{1 * mib, 4 * mib, 16 * mib};
const std::vector<int> windows{1, 8};

struct options {
  double iters_scale = 1.0;
  int repeats = 3;
  bool perftest = true;
};

int iterations(std::size_t size, const options& o) {
  const int base = size <= mib ? 400 : size <= 4 * mib ? 100 : 40;
  return std::max(4, static_cast<int>(base * o.iters_scale));
}

// Streams `iters` messages from rank 0 to rank 1 with up to `window` in flight; the clock
// stops when rank 1's one-byte acknowledgement of the last one arrives.
double p2p_gib_per_s(transport& t, transport_communicator& c, std::size_t size, int iters,
                     int window) {
  std::vector<std::byte> buf(size, std::byte{1});
  unsigned char ack = 0;
  c.barrier();
  const auto start = clock_type::now();
  std::vector<std::future<status>> inflight;
  for (int i = 0; i < iters; ++i) {
    if (static_cast<int>(inflight.size()) == window) {
      t.wait_ok(inflight.front());
      inflight.erase(inflight.begin());
    }
    inflight.push_back(t.rank() == 0 ? t.send_future(1, 1, buf.data(), size)
                                     : t.recv_future(0, 1, buf.data(), size));
  }
  for (auto& f : inflight) t.wait_ok(f);
  if (t.rank() == 1) {
    auto f = t.send_future(0, 2, &ack, 1);
    t.wait_ok(f);
    return 0;
  }
  auto f = t.recv_future(1, 2, &ack, 1);
  t.wait_ok(f);
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return static_cast<double>(size) * iters / seconds / (1024.0 * 1024 * 1024);
}

double all_reduce_gib_per_s(transport_communicator& c, std::size_t size, int iters) {
  std::vector<float> x(size / sizeof(float), 1.0f);
  c.all_reduce(std::span<float>(x));  // warm-up
  c.barrier();
  const auto start = clock_type::now();
  for (int i = 0; i < iters; ++i) c.all_reduce(std::span<float>(x));
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return static_cast<double>(size) * iters / seconds / (1024.0 * 1024 * 1024);
}

// One rank of the mactor side, run in a forked child. Rank 0 writes "size window p2p
// all_reduce" lines, then its endpoint description, to results.txt.
int run_rank(int rank, const std::filesystem::path& dir, const options& o) {
  file_address_exchange exchange(dir);
  ucx_transport t(rank, 2, exchange);
  transport_communicator c(t, {0, 1}, 1);
  std::ostringstream results;
  for (std::size_t size : sizes) {
    const int iters = iterations(size, o);
    double ar = 0;
    for (int k = 0; k < o.repeats; ++k)
      ar = std::max(ar, all_reduce_gib_per_s(c, size, std::max(2, iters / 4)));
    for (int window : windows) {
      p2p_gib_per_s(t, c, size, std::max(2, iters / 10), window);  // warm-up
      double p2p = 0;
      for (int k = 0; k < o.repeats; ++k)
        p2p = std::max(p2p, p2p_gib_per_s(t, c, size, iters, window));
      results << size << ' ' << window << ' ' << p2p << ' ' << ar << '\n';
    }
  }
  if (rank == 0) {
    results << "lanes\n" << t.describe_lanes();
    std::ofstream(dir / "results.txt") << results.str();
  }
  t.shutdown();
  return 0;
}

// Runs ucx_perftest tag_bw server and client on localhost; returns the client's overall
// bandwidth in GiB/s (perftest's "MB/s" are MiB/s), or -1 when it could not run.
double perftest_gib_per_s(std::size_t size, int iters, int window, const std::string& wait_mode) {
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  const std::string common = " -t tag_bw -s " + std::to_string(size) + " -n " +
                             std::to_string(iters) + " -w " + std::to_string(iters / 10 + 1) +
                             " -O " + std::to_string(window) + " -E " + wait_mode + " -p " +
                             std::to_string(port);
  const pid_t server = ::fork();
  if (server == 0) {
    const std::string cmd = "exec ucx_perftest" + common + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string cmd = "ucx_perftest localhost -f" + common + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  double bandwidth = -1;
  char line[1024];
  while (p && std::fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::vector<double> numbers;
    double v;
    while (in >> v) numbers.push_back(v);
    if (numbers.size() >= 6) bandwidth = numbers[5] / 1024.0;  // overall MiB/s
  }
  if (p) ::pclose(p);
  int status = 0;
  if (::waitpid(server, &status, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(server, SIGKILL);
    ::waitpid(server, &status, 0);
  }
  return bandwidth;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters-scale" && i + 1 < argc) {
      o.iters_scale = std::atof(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      o.repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--no-perftest") {
      o.perftest = false;
    } else {
      std::fprintf(stderr,
                   "error: unknown argument %s\n  usage: bench_comm [--iters-scale X] "
                   "[--repeats N] [--no-perftest]\n",
                   a.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::string pattern = (std::filesystem::temp_directory_path() / "bench_comm_XXXXXX").string();
  const std::filesystem::path dir = ::mkdtemp(pattern.data());

  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = run_rank(r, dir, o);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_comm rank %d: %s\n", r, e.what());
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  if (failed) {
    std::fprintf(stderr, "error: a benchmark rank failed (see above)\n");
    return 1;
  }
  std::ifstream in(dir / "results.txt");
  std::printf("UCX data plane, 2 processes on this host, GiB/s, best of %d runs\n", o.repeats);
  std::printf("%8s %7s %11s %14s %6s %15s %6s %18s\n", "size", "window", "mactor p2p",
              "perftest poll", "ratio", "perftest sleep", "ratio", "mactor all-reduce");
  std::string line;
  while (std::getline(in, line) && line != "lanes") {
    std::istringstream fields(line);
    std::size_t size;
    int window;
    double p2p, ar;
    fields >> size >> window >> p2p >> ar;
    double poll = -1, sleep = -1;
    for (int k = 0; o.perftest && k < o.repeats; ++k) {
      poll = std::max(poll, perftest_gib_per_s(size, iterations(size, o), window, "poll"));
      sleep = std::max(sleep, perftest_gib_per_s(size, iterations(size, o), window, "sleep"));
    }
    std::printf("%5zu MiB %7d %11.2f %14.2f %5.0f%% %15.2f %5.0f%% %18.2f\n", size / mib, window,
                p2p, poll, poll > 0 ? 100 * p2p / poll : 0.0, sleep,
                sleep > 0 ? 100 * p2p / sleep : 0.0, ar);
  }
  std::printf("ucx_perftest: -t tag_bw -O <window> -E poll|sleep, the client's overall "
              "bandwidth;\n poll busy-waits (fast on idle cores, slow on a loaded machine), sleep "
              "waits on the event fd like mactor.\n"
              "all-reduce: float32 sum, bytes / time (2 ranks: each sends and receives half).\n"
              "rank 0's endpoints:\n");
  while (std::getline(in, line))
    if (line.find("lane[") != std::string::npos || line.rfind("rank", 0) == 0)
      std::printf("  %s\n", line.c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
