// Expert-parallel all-to-all benchmark: the all-to-all-v collective the MoE token exchange runs
// (comm/collectives.hpp's all_to_all_v_bytes, under model::group::all_to_all_v) on 2 and 4 UCX
// processes of this host, each rank sending SIZE bytes to every other rank, printed next to
// `ucx_perftest -t tag_bw` (2 processes, one stream) at the same message size; then the MoE
// layer's own dispatch and combine at each expert-parallel size for one micro-batch of tokens.
// The machine may be shared, so each round runs every rank count and then perftest, and each
// number is the best of --repeats rounds; read ratios within one run.
// Usage: bench_all_to_all [--ranks 2,4] [--sizes KIB,KIB,...] [--repeats N] [--tokens T]
//                         [--hidden H] [--no-perftest] [--no-moe]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/all_to_all_ranks.hpp"
#include "bench/comm_perftest.hpp"
#include "tensor/host_buffer.hpp"

using namespace mactor::bench;

namespace {

constexpr std::size_t kib = 1024;
constexpr int moe_experts = 8, moe_topk = 2;

struct options {
  std::vector<int> ranks{2, 4};
  std::vector<std::size_t> sizes{4 * kib, 64 * kib, 256 * kib, 1024 * kib, 4096 * kib, 16384 * kib};
  int repeats = 3, tokens = 4096, hidden = 1024;
  bool perftest = true, moe = true;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "error: %s\n  usage: bench_all_to_all [--ranks 2,4] [--sizes KIB,KIB,...] [--repeats N] "
               "[--tokens T] [--hidden H] [--no-perftest] [--no-moe]\n",
               message.c_str());
  std::exit(2);
}

// A comma-separated list of whole numbers in [lo, hi]; `flag` names it in the error.
std::vector<long> parse_list(const std::string& flag, const std::string& text, long lo, long hi) {
  std::vector<long> values;
  std::istringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < lo || v > hi)
      usage_error(flag + " takes whole numbers in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "], comma-separated; got '" + item + "'");
    values.push_back(v);
  }
  return values;
}

long parse_number(const std::string& flag, const char* text, long lo, long hi) {
  const auto v = parse_list(flag, text, lo, hi);
  if (v.size() != 1) usage_error(flag + " takes one number");
  return v[0];
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    const bool takes_value = a == "--ranks" || a == "--sizes" || a == "--repeats" || a == "--tokens" || a == "--hidden";
    if (takes_value && !has_value) usage_error(a + " needs a value");
    if (a == "--ranks" && has_value) {
      o.ranks.clear();
      for (long r : parse_list(a, argv[++i], 2, 8)) o.ranks.push_back(int(r));
    } else if (a == "--sizes" && has_value) {
      o.sizes.clear();
      for (long s : parse_list(a, argv[++i], 1, 256 * 1024)) o.sizes.push_back(std::size_t(s) * kib);
    } else if (a == "--repeats" && has_value) {
      o.repeats = int(parse_number(a, argv[++i], 1, 100));
    } else if (a == "--tokens" && has_value) {
      o.tokens = int(parse_number(a, argv[++i], 1, 1 << 20));
    } else if (a == "--hidden" && has_value) {
      o.hidden = int(parse_number(a, argv[++i], 1, 65536));
    } else if (a == "--no-perftest") {
      o.perftest = false;
    } else if (a == "--no-moe") {
      o.moe = false;
    } else {
      usage_error("unknown argument " + a);
    }
  }
  for (int r : o.ranks)
    if (o.moe && moe_experts % r != 0)
      usage_error("--ranks " + std::to_string(r) + " does not divide the MoE rows' " + std::to_string(moe_experts) +
                  " experts; use 2, 4 or 8, or --no-moe");
  return o;
}

// Enough exchanges for ~128 MiB sent per rank, 4 to 1000 of them.
int iterations(std::size_t bytes_per_iteration) {
  return int(std::clamp<std::size_t>((128u << 20) / bytes_per_iteration, 4, 1000));
}

std::string size_text(std::size_t bytes) {
  const bool whole_mib = bytes % (1024 * kib) == 0;
  return whole_mib ? std::to_string(bytes / (1024 * kib)) + " MiB" : std::to_string(bytes / kib) + " KiB";
}

// One size's best rounds: the all-to-all per rank count, then perftest's two wait modes.
struct size_row {
  std::vector<double> all_to_all;
  double poll = -1, sleep = -1;
};

size_row measure_size(std::vector<std::unique_ptr<all_to_all_ranks>>& sets, const options& o, std::size_t size) {
  size_row row;
  row.all_to_all.assign(sets.size(), 0.0);
  for (int k = 0; k < o.repeats; ++k) {
    for (std::size_t s = 0; s < sets.size(); ++s) {
      const int iters = iterations(size * std::size_t(o.ranks[s] - 1));
      const double rate = sets[s]->ask("a2a " + std::to_string(size) + " " + std::to_string(iters)).at(0);
      row.all_to_all[s] = std::max(row.all_to_all[s], rate);
    }
    if (!o.perftest) continue;
    row.poll = std::max(row.poll, perftest_gib_per_s(size, iterations(size), 1, "poll").overall);
    row.sleep = std::max(row.sleep, perftest_gib_per_s(size, iterations(size), 1, "sleep").overall);
  }
  return row;
}

void print_all_to_all_table(std::vector<std::unique_ptr<all_to_all_ranks>>& sets, const options& o) {
  std::printf("all-to-all-v (the MoE token exchange), GiB/s = bytes each rank sends the other ranks / time,\n"
              "best of %d interleaved rounds; vs pt: against ucx_perftest tag_bw (2 processes, window 1) at "
              "the same message size, the better of its poll and sleep modes; memory: %s\n\n",
              o.repeats, mactor::tensor::huge_pages_enabled() ? "transparent huge pages (perftest UCX_ALLOC_PRIO=thp,heap)"
                                                             : "4 KiB pages (perftest UCX_ALLOC_PRIO=heap)");
  std::printf("| per-peer size |");
  for (int r : o.ranks) std::printf(" %d ranks GiB/s | vs pt |", r);
  std::printf(" perftest poll | perftest sleep |\n|---|");
  for (std::size_t s = 0; s < o.ranks.size(); ++s) std::printf("---:|---:|");
  std::printf("---:|---:|\n");
  std::fflush(stdout);
  for (std::size_t size : o.sizes) {
    const size_row row = measure_size(sets, o, size);
    const double ref = std::max(row.poll, row.sleep);
    std::printf("| %13s |", size_text(size).c_str());
    // Three significant digits at least: a loaded machine moves 4 KiB at a few MiB/s.
    const auto digits = [](double gib_s) { return gib_s >= 1 ? 2 : gib_s >= 0.01 ? 3 : 6; };
    for (double rate : row.all_to_all) {
      if (ref > 0)
        std::printf(" %13.*f | %4.0f%% |", digits(rate), rate, 100 * rate / ref);
      else
        std::printf(" %13.*f | %5s |", digits(rate), rate, "-");
    }
    // A perftest mode that failed (-1: its run did not complete, as on a loaded machine) is "-".
    const auto cell = [&](double rate) {
      char text[32] = "-";
      if (rate > 0) std::snprintf(text, sizeof text, "%.*f", digits(rate), rate);
      return std::string(text);
    };
    std::printf(" %13s | %14s |\n", cell(row.poll).c_str(), cell(row.sleep).c_str());
    std::fflush(stdout);
  }
}

void print_moe_table(std::vector<std::unique_ptr<all_to_all_ranks>>& sets, const options& o) {
  const int iters = 4 * o.repeats;
  std::printf("\nMoE dispatch + combine per expert-parallel rank: %d tokens (one micro-batch), hidden %d, bf16, "
              "%d experts, top-%d, random routing, an identity expert; rank 0's median of %d, ms.\n"
              "permute / unpermute: the local gather into expert order and the sum back (no communication);\n"
              "exchange: the all-to-alls (with the counts' all-gather and the sort by local expert). mactor's\n"
              "alltoall, allgather and flex dispatcher types all run this one exchange, so one row per EP size.\n"
              "exchange GiB/s: MiB to other ranks / the mean exchange time, each way; bare a2a GiB/s: the\n"
              "all-to-all-v alone moving the same bytes in equal blocks between activation buffers (the\n"
              "exchange's memory kind)\n\n",
              o.tokens, o.hidden, moe_experts, moe_topk, iters);
  std::printf("| EP | MiB to other ranks | permute | dispatch exchange | combine exchange | unpermute | total | "
              "exchange GiB/s | bare a2a GiB/s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t s = 0; s < sets.size(); ++s) {
    const auto t = sets[s]->ask("moe " + std::to_string(o.tokens) + " " + std::to_string(o.hidden) + " " +
                                std::to_string(moe_experts) + " " + std::to_string(moe_topk) + " " +
                                std::to_string(iters));
    const double permute = t.at(0), to_experts = t.at(1), from_experts = t.at(2), unpermute = t.at(3), mib = t.at(4);
    const double rate = mib / 1024 / ((to_experts + from_experts) / 2 / 1e3);
    const auto per_peer = std::size_t(mib * (1 << 20) / (o.ranks[s] - 1));
    double bare = 0;
    for (int k = 0; k < o.repeats; ++k)
      bare = std::max(bare, sets[s]->ask("a2a-activations " + std::to_string(per_peer) + " " +
                                         std::to_string(iterations(per_peer * std::size_t(o.ranks[s] - 1))))
                                .at(0));
    std::printf("| %2d | %18.2f | %7.2f | %17.2f | %16.2f | %9.2f | %5.1f | %14.2f | %14.2f |\n", o.ranks[s], mib,
                permute, to_experts, from_experts, unpermute, permute + to_experts + from_experts + unpermute, rate, bare);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // As pretrain_gpt: ranks sharing cores sleep between OpenMP kernels rather than spin (libgomp
  // reads the policy once, when it loads, so set it and start again).
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
  }
  const options o = parse(argc, argv);
  std::string pattern = (std::filesystem::temp_directory_path() / "bench_all_to_all_XXXXXX").string();
  const std::filesystem::path dir = ::mkdtemp(pattern.data());
  std::vector<std::unique_ptr<all_to_all_ranks>> sets;
  for (std::size_t s = 0; s < o.ranks.size(); ++s) {
    std::filesystem::create_directory(dir / std::to_string(s));
    sets.push_back(std::make_unique<all_to_all_ranks>(o.ranks[s], dir / std::to_string(s)));
  }
  print_all_to_all_table(sets, o);
  if (o.moe) print_moe_table(sets, o);
  bool ok = true;
  for (auto& s : sets) ok = s->stop() && ok;
  std::filesystem::remove_all(dir);
  if (!ok) {
    std::fprintf(stderr, "error: a benchmark rank failed (see above)\n");
    return 1;
  }
  return 0;
}
