// bench_comm's mactor side: each rank is a forked child holding a UCX transport; it serves the
// parent's commands, streaming messages from rank 0 to rank 1 or all-reducing, and rank 0 answers
// with what it measured.
#include "bench/comm_ranks.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "comm/collectives.hpp"
#include "comm/file_address_exchange.hpp"
#include "comm/ucx_transport.hpp"
#include "tensor/host_buffer.hpp"

namespace mactor::bench {
namespace {

using namespace mactor::comm;
using clock_type = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

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

// Streams `iters` messages from rank 0 to rank 1 with up to `window` in flight; the clock
// stops when rank 1's one-byte acknowledgement of the last one arrives. The median, like
// ucx_perftest's 50th percentile, is robust to other programs taking the cores for a while.
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

// The MoE token exchange's collective (communicator::all_to_all_v_bytes) with SIZE bytes for the
// other rank and SIZE for this one: the bytes each rank sends the other per second (both ways
// at once).
double all_to_all_gib_per_s(transport_communicator& c, std::size_t size, int iters) {
  tensor::host_vector<std::byte> in(2 * size, std::byte{1}), out(2 * size);
  const std::size_t counts[2] = {size, size};
  auto exchange = [&] { c.all_to_all_v_bytes(std::span<const std::byte>(in), counts, std::span<std::byte>(out), counts); };
  exchange();  // warm-up
  c.barrier();
  const auto start = clock_type::now();
  for (int i = 0; i < iters; ++i) exchange();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return static_cast<double>(size) * iters / seconds / (1024.0 * 1024 * 1024);
}

// One rank of the mactor side, run in a forked child. It serves the parent's commands, one a
// line: "p2p SIZE WINDOW ITERS", "ar SIZE ITERS", "a2a SIZE ITERS" or "quit"; rank 0 answers each measurement
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
    } else if (what == "a2a") {
      result.overall = all_to_all_gib_per_s(c, size, a);
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

}  // namespace

rates ranks::ask(const std::string& command) {
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

ranks start_ranks(bool untouched_send, const std::filesystem::path& dir) {
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
        code = run_rank(rank, dir, untouched_send, ::fdopen(command_pipe[0], "r"), ::fdopen(answer_pipe[1], "w"));
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

}  // namespace mactor::bench
