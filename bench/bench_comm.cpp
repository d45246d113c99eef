// Data-plane benchmark: p2p and all-reduce bandwidth of the UCX transport between two
// processes on this machine, printed next to `ucx_perftest -t tag_bw` run by this program.
// The machine may be shared, so the runs interleave: each repeat measures mactor, then
// perftest polling, then perftest sleeping, at one size and window, and each number is the best
// of --repeats such rounds. The window is how many messages may be in flight; ucx_perftest
// gets the same as -O so both stream alike.
// Usage: bench_comm [--sizes MIB,MIB,...] [--iters-scale X] [--repeats N] [--small-pages]
//                   [--untouched-send] [--no-perftest]
// Both sides use the same kind of memory: by default mactor's own data-plane buffers
// (tensor/host_buffer.hpp: transparent huge pages from 1 MiB) against ucx_perftest allocating
// with UCX_ALLOC_PRIO=thp,heap; with --small-pages, 4 KiB pages on both (MACTOR_HUGE_PAGES=off,
// UCX_ALLOC_PRIO=heap). ucx_perftest's own default (UCX_ALLOC_PRIO=md:sysv,...) is sysv shared
// memory, which neither training nor this comparison uses.
// ucx_perftest never writes its send buffer (ucp_mem_map ALLOCATE, no memset), so the kernel copies
// from the zero page, which is always in cache; --untouched-send does the same on mactor's side
// (the transport's own overhead), the default sends data it wrote (what training does).
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include <sys/mman.h>

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
#include "tensor/host_buffer.hpp"
#include "comm/file_address_exchange.hpp"
#include "comm/ucx_transport.hpp"

using namespace mactor::comm;
namespace tensor = mactor::tensor;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t mib = 1 << 20;
const std::vector<int> windows{1, 8};

struct options {
  std::vector<std::size_t> sizes{1 * mib, 2 * mib, 4 * mib, 8 * mib, 16 * mib};
  double iters_scale = 1.0;
  int repeats = 3;
  bool perftest = true;
  bool small_pages = false;
  bool untouched_send = false;
};

int iterations(std::size_t size, const options& o) {
  const int base = size <= mib ? 400 : size <= 2 * mib ? 200 : size <= 4 * mib ? 100 : 40;
  return std::max(4, static_cast<int>(base * o.iters_scale));
}

struct rates {
  double overall = 0;  // bytes / wall time of the whole stream
  double median = 0;   // window 1: size / the median time between completions
  double cpu_us = -1;  // CPU time of both sides per message (user + system, every thread)
  double worst_overall = -1, worst_median = -1;  // the worst round's, where several ran
};

double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The target, >= 90% of ucx_perftest: judged on the medians where perftest has one
// (window 1), otherwise on the overall rates.
const char* target_met(const rates& mactor, double ref_overall, double ref_median) {
  if (ref_median > 0) return mactor.median >= 0.9 * ref_median ? "ok" : "LOW";
  if (ref_overall > 0) return mactor.overall >= 0.9 * ref_overall ? "ok" : "LOW";
  return "-";
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Streams `iters` messages from rank 0 to rank 1 with up to `window` in flight; the clock
// stops when rank 1's one-byte acknowledgement of the last one arrives. The median, like
// ucx_perftest's 50th percentile, is robust to other programs taking the cores for a while.
// A message buffer of training's kind (tensor/host_buffer.hpp), written; or, `untouched`, fresh pages
// straight from mmap that are never written (all of them the zero page, as ucx_perftest's send
// buffer is; the heap could hand back pages an earlier round wrote).
class message_buffer {
 public:
  message_buffer(std::size_t size, bool untouched) : size_(size), untouched_(untouched) {
    if (untouched) {
      mapped_ = (size + tensor::huge_page_size - 1) / tensor::huge_page_size * tensor::huge_page_size;
      void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      if (tensor::huge_pages_enabled()) ::madvise(p, mapped_, MADV_HUGEPAGE);
      data_ = static_cast<std::byte*>(p);
    } else {
      data_ = tensor::huge_page_allocator<std::byte>().allocate(size);
      std::memset(data_, 1, size);
    }
  }
  ~message_buffer() {
    if (untouched_)
      ::munmap(data_, mapped_);
    else
      tensor::huge_page_allocator<std::byte>().deallocate(data_, size_);
  }
  message_buffer(const message_buffer&) = delete;
  message_buffer& operator=(const message_buffer&) = delete;
  std::byte* data() { return data_; }

 private:
  std::size_t size_, mapped_ = 0;
  bool untouched_;
  std::byte* data_;
};

rates p2p_gib_per_s(transport& t, transport_communicator& c, std::size_t size, int iters, int window,
                    bool untouched_send) {
  message_buffer buf(size, untouched_send && t.rank() == 0);
  std::vector<double> gaps;
  c.barrier();
  const double cpu_start = cpu_seconds(RUSAGE_SELF);
  const auto start = clock_type::now();
  auto last = start;
  std::vector<std::future<status>> inflight;
  for (int i = 0; i < iters; ++i) {
    if (static_cast<int>(inflight.size()) == window) {
      t.wait_ok(inflight.front());
      inflight.erase(inflight.begin());
      const auto now = clock_type::now();
      if (window == 1 && i > 1) gaps.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
    inflight.push_back(t.rank() == 0 ? t.send_future(1, 1, buf.data(), size)
                                     : t.recv_future(0, 1, buf.data(), size));
  }
  for (auto& f : inflight) t.wait_ok(f);
  if (t.rank() == 1) {
    double cpu = cpu_seconds(RUSAGE_SELF) - cpu_start;  // the acknowledgement carries it
    auto f = t.send_future(0, 2, &cpu, sizeof cpu);
    t.wait_ok(f);
    return {};
  }
  double peer_cpu = 0;
  auto f = t.recv_future(1, 2, &peer_cpu, sizeof peer_cpu);
  t.wait_ok(f);
  const double cpu = cpu_seconds(RUSAGE_SELF) - cpu_start + peer_cpu;
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  constexpr double gib = 1024.0 * 1024 * 1024;
  const double gap = median_of(gaps);
  return {static_cast<double>(size) * iters / seconds / gib, gap > 0 ? size / gap / gib : 0,
          1e6 * cpu / iters};
}

double all_reduce_gib_per_s(transport_communicator& c, std::size_t size, int iters) {
  tensor::host_vector<float> x(size / sizeof(float), 1.0f);
  c.all_reduce(std::span<float>(x));  // warm-up
  c.barrier();
  const auto start = clock_type::now();
  for (int i = 0; i < iters; ++i) c.all_reduce(std::span<float>(x));
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return static_cast<double>(size) * iters / seconds / (1024.0 * 1024 * 1024);
}

// One rank of the mactor side, run in a forked child. It serves the parent's commands, one a
// line: "p2p SIZE WINDOW ITERS", "ar SIZE ITERS" or "quit"; rank 0 answers each measurement
// with one line (GiB/s) and "quit" with its endpoint description.
int run_rank(int rank, const std::filesystem::path& dir, bool untouched_send, std::FILE* commands,
             std::FILE* answers) {
  file_address_exchange exchange(dir);
  ucx_transport t(rank, 2, exchange);
  transport_communicator c(t, {0, 1}, 1);
  char line[256];
  while (std::fgets(line, sizeof line, commands)) {
    std::istringstream in(line);
    std::string what;
    std::size_t size = 0;
    int a = 0, b = 0;
    in >> what >> size >> a >> b;
    rates result;
    if (what == "p2p") {
      result = p2p_gib_per_s(t, c, size, b, a, untouched_send);
    } else if (what == "ar") {
      result.overall = all_reduce_gib_per_s(c, size, a);
    } else {
      break;
    }
    if (rank == 0) {
      std::fprintf(answers, "%.6f %.6f %.6f\n", result.overall, result.median, result.cpu_us);
      std::fflush(answers);
    }
  }
  if (rank == 0) {
    const auto& spin = t.spin();
    const std::string adapting = " or up to 5/4 of its recent waits, at most " +
                                 std::to_string(wait_spin::max_adaptive_spin.count()) + " us";
    std::fprintf(answers, "rank 0 waits by polling %lld us%s, then sleeping (MACTOR_UCX_SPIN_US to change)\n",
                 static_cast<long long>(spin.base().count()), spin.adaptive() ? adapting.c_str() : "");
    std::fputs(t.describe_lanes().c_str(), answers);
    std::fclose(answers);
  }
  t.shutdown();
  return 0;
}

// The parent's side: both ranks get each command; rank 0's answer comes back.
struct ranks {
  std::FILE* to[2];
  std::FILE* from;
  std::vector<pid_t> pids;

  rates ask(const std::string& command) {
    for (std::FILE* f : to) {
      std::fprintf(f, "%s\n", command.c_str());
      std::fflush(f);
    }
    char line[256];
    if (!std::fgets(line, sizeof line, from)) {
      std::fprintf(stderr, "error: a benchmark rank failed (see above)\n");
      std::exit(1);
    }
    rates r;
    std::istringstream(line) >> r.overall >> r.median >> r.cpu_us;
    return r;
  }
};

// Runs ucx_perftest tag_bw server and client on localhost; returns the client's overall
// bandwidth in GiB/s (perftest's "MB/s" are MiB/s) and size / its 50th-percentile time per
// message, or -1s when it could not run. cpu_us: here the CPU time of the whole run (both
// processes, start-up included), for perftest_cpu_us_per_message.
// The memory ucx_perftest allocates: the same kind as mactor's buffers in this run.
std::string perftest_alloc() { return tensor::huge_pages_enabled() ? "UCX_ALLOC_PRIO=thp,heap " : "UCX_ALLOC_PRIO=heap "; }

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

int perftest_messages(int iters) { return iters + iters / 10 + 1; }  // -n plus -w

// perftest -E sleep's CPU time per message: a full run less a 2-message run (start-up, connection).
double perftest_cpu_us_per_message(std::size_t size, int iters, int window) {
  const rates full = perftest_gib_per_s(size, iters, window, "sleep");
  const rates tiny = perftest_gib_per_s(size, 2, window, "sleep");
  if (full.overall <= 0 || tiny.overall <= 0) return -1;
  return (full.cpu_us - tiny.cpu_us) / (perftest_messages(iters) - perftest_messages(2));
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters-scale" && i + 1 < argc) {
      o.iters_scale = std::atof(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      o.sizes.clear();
      std::istringstream list(argv[++i]);
      std::string item;
      while (std::getline(list, item, ',')) {
        const double m = std::atof(item.c_str());
        if (m <= 0 || m > 1024) {
          std::fprintf(stderr, "error: --sizes takes MiB values in (0, 1024], e.g. 1,4,16; got '%s'\n",
                       item.c_str());
          std::exit(2);
        }
        o.sizes.push_back(static_cast<std::size_t>(m * mib));
      }
    } else if (a == "--repeats" && i + 1 < argc) {
      o.repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--small-pages") {
      o.small_pages = true;
    } else if (a == "--untouched-send") {
      o.untouched_send = true;
    } else if (a == "--no-perftest") {
      o.perftest = false;
    } else {
      std::fprintf(stderr,
                   "error: unknown argument %s\n  usage: bench_comm [--sizes MIB,MIB,...] "
                   "[--iters-scale X] [--repeats N] [--small-pages] [--untouched-send] [--no-perftest]\n",
                   a.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Forks the two mactor ranks; each serves the parent's commands (run_rank).
ranks start_ranks(const options& o, const std::filesystem::path& dir) {
  int answer_pipe[2];
  if (::pipe(answer_pipe) != 0) std::exit(1);
  ranks r{};
  for (int rank = 0; rank < 2; ++rank) {
    int command_pipe[2];
    if (::pipe(command_pipe) != 0) std::exit(1);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(command_pipe[1]);
      ::close(answer_pipe[0]);
      for (int k = 0; k < rank; ++k) std::fclose(r.to[k]);
      int code = 1;
      try {
        code = run_rank(rank, dir, o.untouched_send, ::fdopen(command_pipe[0], "r"), ::fdopen(answer_pipe[1], "w"));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_comm rank %d: %s\n", rank, e.what());
      }
      ::_exit(code);
    }
    ::close(command_pipe[0]);
    r.to[rank] = ::fdopen(command_pipe[1], "w");
    r.pids.push_back(pid);
  }
  ::close(answer_pipe[1]);
  r.from = ::fdopen(answer_pipe[0], "r");
  return r;
}

// Tells both ranks to quit; returns rank 0's endpoint description, and whether any rank failed.
std::pair<std::string, bool> stop_ranks(ranks& r) {
  for (std::FILE* f : r.to) {
    std::fputs("quit\n", f);
    std::fclose(f);
  }
  std::string lanes;
  char line[1024];
  while (std::fgets(line, sizeof line, r.from)) lanes += line;
  bool failed = false;
  for (pid_t pid : r.pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed = failed || !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return {lanes, failed};
}

void print_header(const options& o) {
  std::printf("UCX data plane, 2 processes on this host, GiB/s, best of %d interleaved rounds;\n"
              "mactor sends %s; memory on both sides: %s\n",
              o.repeats,
              o.untouched_send ? "from a buffer it never wrote, as ucx_perftest does (--untouched-send)"
                               : "data it wrote (ucx_perftest sends a buffer it never wrote)",
              tensor::huge_pages_enabled() ? "transparent huge pages from 1 MiB (mactor's data-plane buffers; perftest "
                                     "UCX_ALLOC_PRIO=thp,heap)"
                                   : "4 KiB pages (MACTOR_HUGE_PAGES=off; perftest UCX_ALLOC_PRIO=heap)");
  std::printf("%12s %17s %17s %17s %16s %6s %6s %9s %15s\n", "", "mactor p2p", "perftest poll",
              "perftest sleep", "mactor/perftest", "", "pt", "mactor", "CPU us/message");
  std::printf("%8s %3s %8s %7s %8s %7s %8s %7s %8s %7s %6s %6s %9s %7s %7s\n", "size", "win", "overall",
              "median", "overall", "median", "overall", "median", "overall", "median", "target",
              "spread", "all-red.", "mactor", "sleep");
  std::fflush(stdout);
}

// One window's best rounds at one size: mactor's, and perftest's in both modes.
struct measured {
  rates p2p, poll{-1, -1}, sleep{-1, -1};
};

void keep_best(rates& best, const rates& x) {
  best.overall = std::max(best.overall, x.overall);
  best.median = std::max(best.median, x.median);
  auto worst = [](double& w, double v) { if (v > 0) w = w < 0 ? v : std::min(w, v); };
  worst(best.worst_overall, x.overall);
  worst(best.worst_median, x.median);
  if (x.cpu_us > 0 && (best.cpu_us < 0 || x.cpu_us < best.cpu_us)) best.cpu_us = x.cpu_us;
}

// Every window's rounds at one size (filling `rows`, one per window); returns the all-reduce's
// best rate. The all-reduce and every window's rounds alternate with perftest's, so a passing
// disturbance (the cores' state after a busy-polling perftest run) costs one round of each.
double measure_size(ranks& r, std::size_t size, const options& o, std::vector<measured>& rows) {
  const int iters = iterations(size, o);
  const std::string sz = std::to_string(size) + " ";
  double all_reduce = 0;
  r.ask("ar " + sz + std::to_string(1));  // warm-up
  rows.assign(std::size(windows), {});
  for (int window : windows)
    r.ask("p2p " + sz + std::to_string(window) + " " + std::to_string(std::max(2, iters / 10)));  // warm-up
  for (int k = 0; k < o.repeats; ++k) {
    all_reduce = std::max(all_reduce, r.ask("ar " + sz + std::to_string(std::max(2, iters / 4))).overall);
    for (std::size_t wi = 0; wi < std::size(windows); ++wi) {
      const int window = windows[wi];
      keep_best(rows[wi].p2p, r.ask("p2p " + sz + std::to_string(window) + " " + std::to_string(iters)));
      if (!o.perftest) continue;
      keep_best(rows[wi].poll, perftest_gib_per_s(size, iters, window, "poll"));
      keep_best(rows[wi].sleep, perftest_gib_per_s(size, iters, window, "sleep"));
    }
  }
  return all_reduce;
}

// One row of the table: mactor against the better of perftest's two modes, per measure.
void print_row(std::size_t size, int window, const measured& m, double all_reduce, int repeats) {
  const auto& [p2p, poll, sleep] = m;
  const double ref_overall = std::max(poll.overall, sleep.overall);
  const double ref_median = std::max(poll.median, sleep.median);
  auto pct = [](double x, double ref) { return ref > 0 ? 100 * x / ref : 0.0; };
  // The machine's noise, seen on one program: perftest's worst round against its best, in
  // the mode and measure the target is judged on.
  const bool by_median = ref_median > 0;
  const rates& ref = by_median ? (poll.median >= sleep.median ? poll : sleep)
                               : (poll.overall >= sleep.overall ? poll : sleep);
  const double spread = repeats < 2 || ref.overall <= 0 ? -1
                        : by_median ? pct(ref.worst_median, ref.median)
                                    : pct(ref.worst_overall, ref.overall);
  // "-": no per-message median with a window (perftest's percentile times a post; completions
  // come in bursts).
  auto num = [](double x, const char* f) {
    char b[32];
    if (x < 0) return std::string("-");
    std::snprintf(b, sizeof b, f, x);
    return std::string(b);
  };
  std::printf("%5.3g MiB %3d %8.2f %7s %8s %7s %8s %7s %8s %7s %6s %6s %9.2f %7s %7s\n",
              static_cast<double>(size) / mib, window, p2p.overall, num(p2p.median > 0 ? p2p.median : -1, "%.2f").c_str(),
              num(poll.overall, "%.2f").c_str(), num(poll.median, "%.2f").c_str(),
              num(sleep.overall, "%.2f").c_str(), num(sleep.median, "%.2f").c_str(),
              num(ref_overall > 0 ? pct(p2p.overall, ref_overall) : -1, "%.0f%%").c_str(),
              num(ref_median > 0 ? pct(p2p.median, ref_median) : -1, "%.0f%%").c_str(),
              target_met(p2p, ref_overall, ref_median), num(spread, "%.0f%%").c_str(), all_reduce,
              num(p2p.cpu_us, "%.0f").c_str(), num(sleep.cpu_us, "%.0f").c_str());
  std::fflush(stdout);
}

void print_legend(const std::string& lanes) {
  std::printf("win: messages in flight (ucx_perftest -t tag_bw -O win). overall: bytes / wall "
              "time of the stream;\n median: size / the median time per message (perftest's "
              "50th percentile), robust to\n other programs taking the cores. perftest poll "
              "busy-waits (fast on idle cores, slow on a\n loaded machine); sleep waits on the "
              "event fd like mactor. mactor/perftest: against the\n better perftest mode. CPU "
              "us/message: user+system time of both sides per message\n (mactor: every thread "
              "of both ranks; perftest -E sleep: a run less a 2-message run).\n"
              "target: ok at >= 90%%, on the medians where perftest has one (win 1;\n with a "
              "window its percentile times one post), else overall.\n"
              "pt spread: perftest's worst round / its best, on that measure and mode: the "
              "machine's\n noise seen on one program; a target row within it is noise too.\n"
              "all-reduce: float32 sum, bytes / time (2 ranks: each sends and receives half).\n"
              "rank 0's endpoints:\n");
  std::istringstream in(lanes);
  std::string l;
  while (std::getline(in, l))
    if (l.find("lane[") != std::string::npos || l.rfind("rank", 0) == 0)
      std::printf("  %s\n", l.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  if (o.small_pages) ::setenv("MACTOR_HUGE_PAGES", "off", 1);  // before anything reads it
  std::string pattern = (std::filesystem::temp_directory_path() / "bench_comm_XXXXXX").string();
  const std::filesystem::path dir = ::mkdtemp(pattern.data());
  ranks r = start_ranks(o, dir);
  print_header(o);
  std::vector<measured> rows;
  for (std::size_t size : o.sizes) {
    const double all_reduce = measure_size(r, size, o, rows);
    for (std::size_t wi = 0; wi < std::size(windows); ++wi) {
      // CPU per message barely depends on other programs' load, unlike the rates.
      rows[wi].sleep.cpu_us = o.perftest ? perftest_cpu_us_per_message(size, iterations(size, o), windows[wi]) : -1;
      print_row(size, windows[wi], rows[wi], all_reduce, o.repeats);
    }
  }
  const auto [lanes, failed] = stop_ranks(r);
  print_legend(lanes);
  std::filesystem::remove_all(dir);
  if (failed) {
    std::fprintf(stderr, "error: a benchmark rank failed (see above)\n");
    return 1;
  }
  return 0;
}
