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
// The ranks' side is in comm_ranks.cpp, ucx_perftest's in comm_perftest.cpp; this file holds the
// rounds and the table.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench/comm_perftest.hpp"
#include "bench/comm_ranks.hpp"
#include "tensor/host_buffer.hpp"

using namespace mactor::bench;
namespace tensor = mactor::tensor;

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

// The target, >= 90% of ucx_perftest: judged on the medians where perftest has one
// (window 1), otherwise on the overall rates.
const char* target_met(const rates& mactor, double ref_overall, double ref_median) {
  if (ref_median > 0) return mactor.median >= 0.9 * ref_median ? "ok" : "LOW";
  if (ref_overall > 0) return mactor.overall >= 0.9 * ref_overall ? "ok" : "LOW";
  return "-";
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

void print_header(const options& o) {
  std::printf("UCX data plane, 2 processes on this host, GiB/s, best of %d interleaved rounds;\n"
              "mactor sends %s; memory on both sides: %s\n",
              o.repeats,
              o.untouched_send ? "from a buffer it never wrote, as ucx_perftest does (--untouched-send)"
                               : "data it wrote (ucx_perftest sends a buffer it never wrote)",
              tensor::huge_pages_enabled() ? "transparent huge pages from 1 MiB (mactor's data-plane buffers; perftest "
                                     "UCX_ALLOC_PRIO=thp,heap)"
                                   : "4 KiB pages (MACTOR_HUGE_PAGES=off; perftest UCX_ALLOC_PRIO=heap)");
  std::printf("%12s %17s %17s %17s %16s %6s %6s %18s %15s\n", "", "mactor p2p", "perftest poll",
              "perftest sleep", "mactor/perftest", "", "pt", "mactor", "CPU us/message");
  std::printf("%8s %3s %8s %7s %8s %7s %8s %7s %8s %7s %6s %6s %9s %8s %7s %7s\n", "size", "win", "overall",
              "median", "overall", "median", "overall", "median", "overall", "median", "target",
              "spread", "all-red.", "all2all", "mactor", "sleep");
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

// The collectives' best rates at one size.
struct collective_rates {
  double all_reduce = 0, all_to_all = 0;
};

// Every window's rounds at one size (filling `rows`, one per window); returns the collectives'
// best rates. The collectives and every window's rounds alternate with perftest's, so a passing
// disturbance (the cores' state after a busy-polling perftest run) costs one round of each.
collective_rates measure_size(ranks& r, std::size_t size, const options& o, std::vector<measured>& rows) {
  const int iters = iterations(size, o);
  const std::string sz = std::to_string(size) + " ";
  collective_rates best;
  r.ask("ar " + sz + std::to_string(1));  // warm-up
  rows.assign(std::size(windows), {});
  for (int window : windows)
    r.ask("p2p " + sz + std::to_string(window) + " " + std::to_string(std::max(2, iters / 10)));  // warm-up
  for (int k = 0; k < o.repeats; ++k) {
    best.all_reduce = std::max(best.all_reduce, r.ask("ar " + sz + std::to_string(std::max(2, iters / 4))).overall);
    best.all_to_all = std::max(best.all_to_all, r.ask("a2a " + sz + std::to_string(std::max(2, iters / 4))).overall);
    for (std::size_t wi = 0; wi < std::size(windows); ++wi) {
      const int window = windows[wi];
      keep_best(rows[wi].p2p, r.ask("p2p " + sz + std::to_string(window) + " " + std::to_string(iters)));
      if (!o.perftest) continue;
      keep_best(rows[wi].poll, perftest_gib_per_s(size, iters, window, "poll"));
      keep_best(rows[wi].sleep, perftest_gib_per_s(size, iters, window, "sleep"));
    }
  }
  return best;
}

// One row of the table: mactor against the better of perftest's two modes, per measure.
void print_row(std::size_t size, int window, const measured& m, const collective_rates& collectives, int repeats) {
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
  std::printf("%5.3g MiB %3d %8.2f %7s %8s %7s %8s %7s %8s %7s %6s %6s %9.2f %8.2f %7s %7s\n",
              static_cast<double>(size) / mib, window, p2p.overall, num(p2p.median > 0 ? p2p.median : -1, "%.2f").c_str(),
              num(poll.overall, "%.2f").c_str(), num(poll.median, "%.2f").c_str(),
              num(sleep.overall, "%.2f").c_str(), num(sleep.median, "%.2f").c_str(),
              num(ref_overall > 0 ? pct(p2p.overall, ref_overall) : -1, "%.0f%%").c_str(),
              num(ref_median > 0 ? pct(p2p.median, ref_median) : -1, "%.0f%%").c_str(),
              target_met(p2p, ref_overall, ref_median), num(spread, "%.0f%%").c_str(), collectives.all_reduce,
              collectives.all_to_all,
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
              "all-to-all: the MoE token exchange (all_to_all_v): bytes each rank sends the other / time,\n"
              " both directions at once (compare with p2p at win 1, one direction).\n"
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
  ranks r = start_ranks(o.untouched_send, dir);
  print_header(o);
  std::vector<measured> rows;
  for (std::size_t size : o.sizes) {
    const auto collectives = measure_size(r, size, o, rows);
    for (std::size_t wi = 0; wi < std::size(windows); ++wi) {
      // CPU per message barely depends on other programs' load, unlike the rates.
      rows[wi].sleep.cpu_us = o.perftest ? perftest_cpu_us_per_message(size, iterations(size, o), windows[wi]) : -1;
      print_row(size, windows[wi], rows[wi], collectives, o.repeats);
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
