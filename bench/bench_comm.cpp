// Data-plane benchmark: p2p and all-reduce bandwidth of the UCX transport between two
// processes on this machine, printed next to `ucx_perftest -t tag_bw` run in the same program.
// Usage: bench_comm [--iters-scale X] [--window W] [--no-perftest]
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

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

struct options {
  double iters_scale = 1.0;
  int window = 8;
  bool perftest = true;
};

int iterations(std::size_t size, const options& o) {
  const int base = size <= mib ? 400 : size <= 4 * mib ? 100 : 40;
  return std::max(4, static_cast<int>(base * o.iters_scale));
}

// Streams `iters` messages from rank 0 to rank 1 with up to `window` in flight, like
// ucx_perftest's tag_bw; the clock stops when rank 1's one-byte acknowledgement arrives.
double p2p_gib_per_s(transport& t, transport_communicator& c, std::size_t size, int iters,
                     int window) {
  std::vector<std::byte> buf(size, std::byte{1});
  unsigned char ack = 0;
  c.barrier();
  const auto start = clock_type::now();
  std::vector<std::future<status>> inflight;
  for (int i = 0; i < iters; ++i) {
    if (static_cast<int>(inflight.size()) == window) {
      wait_ok(inflight.front());
      inflight.erase(inflight.begin());
    }
    inflight.push_back(t.rank() == 0 ? t.send_future(1, 1, buf.data(), size)
                                     : t.recv_future(0, 1, buf.data(), size));
  }
  for (auto& f : inflight) wait_ok(f);
  if (t.rank() == 1) {
    auto f = t.send_future(0, 2, &ack, 1);
    wait_ok(f);
    return 0;
  }
  auto f = t.recv_future(1, 2, &ack, 1);
  wait_ok(f);
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

// Both ranks of the mactor side, as forked children; rank 0 writes its results to `out`.
int run_rank(int rank, const std::filesystem::path& dir, const options& o) {
  file_address_exchange exchange(dir);
  ucx_transport t(rank, 2, exchange);
  transport_communicator c(t, {0, 1}, 1);
  std::ostringstream results;
  for (std::size_t size : sizes) {
    p2p_gib_per_s(t, c, size, std::max(2, iterations(size, o) / 10), o.window);  // warm-up
    const double p2p = p2p_gib_per_s(t, c, size, iterations(size, o), o.window);
    const double ar = all_reduce_gib_per_s(c, size, std::max(2, iterations(size, o) / 4));
    results << size << ' ' << p2p << ' ' << ar << '\n';
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
double perftest_gib_per_s(std::size_t size, int iters, const std::string& extra) {
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  const std::string common = " -t tag_bw -s " + std::to_string(size) + " -n " +
                             std::to_string(iters) + " -w " + std::to_string(iters / 10 + 1) +
                             " -p " + std::to_string(port) + " " + extra;
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
    } else if (a == "--window" && i + 1 < argc) {
      o.window = std::atoi(argv[++i]);
    } else if (a == "--no-perftest") {
      o.perftest = false;
    } else {
      std::fprintf(stderr,
                   "error: unknown argument %s\n  usage: bench_comm [--iters-scale X] "
                   "[--window W] [--no-perftest]\n",
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
  std::printf("UCX data plane, 2 processes on this host (GiB/s; perftest = ucx_perftest tag_bw)\n");
  std::printf("%8s %10s %10s %7s %12s %7s %12s\n", "size", "p2p", "perftest", "ratio",
              "perftest -e", "ratio", "all-reduce");
  std::string line;
  while (std::getline(in, line) && line != "lanes") {
    std::istringstream fields(line);
    std::size_t size;
    double p2p, ar;
    fields >> size >> p2p >> ar;
    const int iters = iterations(size, o);
    const double pt = o.perftest ? perftest_gib_per_s(size, iters, "") : -1;
    const double pte = o.perftest ? perftest_gib_per_s(size, iters, "-e") : -1;
    std::printf("%5zu MiB %10.2f %10.2f %6.0f%% %12.2f %6.0f%% %12.2f\n", size / mib, p2p, pt,
                pt > 0 ? 100 * p2p / pt : 0.0, pte, pte > 0 ? 100 * p2p / pte : 0.0, ar);
  }
  std::printf("(all-reduce: float32 sum, algorithm bandwidth = bytes / time; with 2 ranks the\n"
              " ring moves the same bytes as one p2p transfer each way)\n");
  std::printf("rank 0's endpoint lanes:\n");
  while (std::getline(in, line)) std::printf("  %s\n", line.c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
