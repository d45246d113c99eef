// bench_all_to_all's ranks: each forked child holds a UCX transport, a communicator over all the
// ranks and the expert-parallel group the MoE layer would use over it; rank 0 answers each
// command with what it measured.
#include "bench/all_to_all_ranks.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "bench/moe_dispatch_timing.hpp"
#include "comm/collectives.hpp"
#include "comm/file_address_exchange.hpp"
#include "comm/ucx_transport.hpp"
#include "tensor/host_buffer.hpp"
#include "training/parallel_context.hpp"

namespace mactor::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// A written send buffer and a receive buffer of `bytes` each: the data plane's kind (huge pages
// from 1 MiB, as bench_comm's), or, `activations`, the kind the MoE exchange's rows live in (plain
// pages from the activation block cache, tensor/tensor.cpp).
class exchange_buffers {
 public:
  exchange_buffers(std::size_t bytes, bool activations) {
    if (activations) {
      // bf16 elements carry the bytes; an odd byte count rounds up.
      const std::int64_t elements = std::int64_t((bytes + 1) / 2);
      in_tensor_ = tensor::tensor({elements}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
      out_tensor_ = tensor::tensor({elements}, tensor::dtype::bfloat16, tensor::memory_kind::activations);
      in_ = static_cast<std::byte*>(in_tensor_.data()), out_ = static_cast<std::byte*>(out_tensor_.data());
    } else {
      in_vector_.resize(bytes), out_vector_.resize(bytes);
      in_ = in_vector_.data(), out_ = out_vector_.data();
    }
    std::fill_n(in_, bytes, std::byte{1});
    bytes_ = bytes;
  }
  std::span<const std::byte> in() const { return {in_, bytes_}; }
  std::span<std::byte> out() const { return {out_, bytes_}; }

 private:
  tensor::tensor in_tensor_, out_tensor_;
  tensor::host_vector<std::byte> in_vector_, out_vector_;
  std::byte *in_ = nullptr, *out_ = nullptr;
  std::size_t bytes_ = 0;
};

// all_to_all_v_bytes (what group::all_to_all_v, the MoE exchange, runs) with `per_peer` bytes to
// every rank, from a buffer this rank wrote. The clock runs from a barrier to a barrier after the
// last exchange, so it covers the slowest rank.
double all_to_all_gib_per_s(comm::transport_communicator& c, std::size_t per_peer, int iters, bool activations) {
  const std::size_t n = static_cast<std::size_t>(c.size());
  const exchange_buffers buffers(n * per_peer, activations);
  const std::vector<std::size_t> counts(n, per_peer);
  auto exchange = [&] { c.all_to_all_v_bytes(buffers.in(), counts, buffers.out(), counts); };
  exchange();  // warm-up: connections and registrations
  c.barrier();
  const auto start = clock_type::now();
  for (int i = 0; i < iters; ++i) exchange();
  c.barrier();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return double(per_peer) * double(n - 1) * iters / seconds / (1024.0 * 1024 * 1024);
}

std::string serve(const std::string& line, comm::transport_communicator& c, model::group& ep) {
  std::istringstream in(line);
  std::string what;
  in >> what;
  std::ostringstream answer;
  if (what == "a2a" || what == "a2a-activations") {
    std::size_t per_peer = 0;
    int iters = 0;
    in >> per_peer >> iters;
    answer << all_to_all_gib_per_s(c, per_peer, iters, what == "a2a-activations");
  } else if (what == "moe") {
    moe_dispatch_shape s;
    int iters = 0;
    in >> s.tokens >> s.hidden >> s.experts >> s.topk >> iters;
    const auto t = time_moe_dispatch(ep, s, iters, [&] { c.barrier(); });
    answer << t.permute_ms << ' ' << t.dispatch_exchange_ms << ' ' << t.combine_exchange_ms << ' ' << t.unpermute_ms << ' '
           << t.sent_mib;
  } else {
    return {};
  }
  return answer.str();
}

int run_rank(int rank, int n, const std::filesystem::path& dir, std::FILE* commands, std::FILE* answers) {
  comm::file_address_exchange exchange(dir);
  comm::ucx_transport t(rank, n, exchange);
  std::vector<int> members(static_cast<std::size_t>(n));
  std::iota(members.begin(), members.end(), 0);
  comm::transport_communicator c(t, members, 1);
  comm::transport_communicator ep_communicator(t, members, 2);
  const auto ep = training::make_model_group(ep_communicator);
  char line[256];
  while (std::fgets(line, sizeof line, commands)) {
    const std::string answer = serve(line, c, *ep);
    if (answer.empty()) break;
    if (rank == 0) {
      std::fprintf(answers, "%s\n", answer.c_str());
      std::fflush(answers);
    }
  }
  if (rank == 0) std::fclose(answers);
  t.shutdown();
  return 0;
}

}  // namespace

all_to_all_ranks::all_to_all_ranks(int n, const std::filesystem::path& dir) {
  int answer_pipe[2];
  if (::pipe(answer_pipe) != 0) std::exit(1);
  for (int rank = 0; rank < n; ++rank) {
    int command_pipe[2];
    if (::pipe(command_pipe) != 0) std::exit(1);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(command_pipe[1]);
      ::close(answer_pipe[0]);
      for (std::FILE* f : to_) std::fclose(f);
      int code = 1;
      try {
        code = run_rank(rank, n, dir, ::fdopen(command_pipe[0], "r"), ::fdopen(answer_pipe[1], "w"));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_all_to_all rank %d: %s\n", rank, e.what());
      }
      ::_exit(code);
    }
    ::close(command_pipe[0]);
    to_.push_back(::fdopen(command_pipe[1], "w"));
    pids_.push_back(pid);
  }
  ::close(answer_pipe[1]);
  from_ = ::fdopen(answer_pipe[0], "r");
}

all_to_all_ranks::~all_to_all_ranks() { stop(); }

std::vector<double> all_to_all_ranks::ask(const std::string& command) {
  for (std::FILE* f : to_) {
    std::fprintf(f, "%s\n", command.c_str());
    std::fflush(f);
  }
  char line[256];
  if (!std::fgets(line, sizeof line, from_)) {
    std::fprintf(stderr, "error: a benchmark rank failed (see above)\n");
    std::exit(1);
  }
  std::vector<double> numbers;
  std::istringstream in(line);
  for (double v; in >> v;) numbers.push_back(v);
  return numbers;
}

bool all_to_all_ranks::stop() {
  for (std::FILE* f : to_) {
    std::fputs("quit\n", f);
    std::fclose(f);
  }
  to_.clear();
  if (from_) std::fclose(from_);
  from_ = nullptr;
  bool failed = false;
  for (pid_t pid : pids_) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed = failed || !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  pids_.clear();
  return !failed;
}

}  // namespace mactor::bench
