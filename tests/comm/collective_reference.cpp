// Runs each collective once on one member and checks it against the naive reference.
#include "collective_reference.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace mactor::comm::testing {
namespace {

std::uint64_t fnv1a(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string where(const communicator& c, const char* op, std::size_t count) {
  return std::string(op) + " (member " + std::to_string(c.rank()) + " of " +
         std::to_string(c.size()) + ", " + std::to_string(count) + " elements)";
}

}  // namespace

std::string exercise_collectives(communicator& c, std::size_t count) {
  const int n = c.size(), me = c.rank();
  for (bool integral : {true, false}) {
    std::vector<float> x = inputs(me, count, integral);
    c.all_reduce(std::span<float>(x));
    const auto want = reference_sum(n, count, integral);
    if (std::size_t bad = count_mismatches(x, want, 0, n, integral))
      return where(c, "all_reduce", count) + ": " + std::to_string(bad) + " elements differ";
    // Every member must hold the same bits.
    std::uint64_t mine = fnv1a(x.data(), x.size() * sizeof(float));
    std::vector<std::uint64_t> all(n);
    c.all_gather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(all));
    for (std::uint64_t h : all)
      if (h != mine) return where(c, "all_reduce", count) + ": members hold different bits";
  }
  {
    std::vector<double> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = input_value(me, i, false);
    c.all_reduce(std::span<double>(x));
    const auto want = reference_sum(n, count, false);
    for (std::size_t i = 0; i < count; ++i)
      if (std::abs(x[i] - want[i]) > 1e-9 * (1 + std::abs(want[i])))
        return where(c, "all_reduce<double>", count) + ": element " + std::to_string(i);
  }
  {
    const std::vector<float> in = inputs(me, count * n, true);
    std::vector<float> out(count);
    c.reduce_scatter(std::span<const float>(in), std::span<float>(out));
    const auto want = reference_sum(n, count * n, true);
    if (std::size_t bad = count_mismatches(out, want, count * me, n, true))
      return where(c, "reduce_scatter", count) + ": " + std::to_string(bad) + " elements differ";
  }
  {
    const std::vector<float> in = inputs(me, count, false);
    std::vector<float> out(count * n);
    c.all_gather(std::span<const float>(in), std::span<float>(out));
    for (int j = 0; j < n; ++j)
      if (std::memcmp(out.data() + count * j, inputs(j, count, false).data(), count * 4) != 0)
        return where(c, "all_gather", count) + ": block " + std::to_string(j) + " differs";
  }
  {
    const int root = n - 1;
    std::vector<float> x = me == root ? inputs(root, count, false) : std::vector<float>(count);
    c.broadcast(std::span<float>(x), root);
    if (x != inputs(root, count, false)) return where(c, "broadcast", count) + ": data differs";
  }
  {
    const std::vector<float> in = inputs(me, count * n, false);
    std::vector<float> out(count * n);
    c.all_to_all(std::span<const float>(in), std::span<float>(out));
    for (int j = 0; j < n; ++j) {
      const std::vector<float> theirs = inputs(j, count * n, false);
      if (std::memcmp(out.data() + count * j, theirs.data() + count * me, count * 4) != 0)
        return where(c, "all_to_all", count) + ": block from member " + std::to_string(j);
    }
  }
  {
    // Variable sizes, empty blocks included: member i sends (i + j + count) % 3 * count elements
    // to member j, taken from the start of its inputs; the counts are exchanged first.
    std::vector<std::size_t> send_counts(n), recv_counts(n);
    auto elements = [&](int from, int to) { return std::size_t((from + to + count) % 3) * count; };
    std::size_t total = 0;
    for (int j = 0; j < n; ++j) total += send_counts[j] = elements(me, j);
    c.all_to_all(std::span<const std::size_t>(send_counts), std::span<std::size_t>(recv_counts));
    std::size_t incoming = 0;
    for (int j = 0; j < n; ++j) {
      if (recv_counts[j] != elements(j, me)) return where(c, "all_to_all of the counts", count);
      incoming += recv_counts[j];
    }
    const std::vector<float> mine = inputs(me, total, false);
    std::vector<float> got(incoming);
    c.all_to_all_v(std::span<const float>(mine), std::span<const std::size_t>(send_counts), std::span<float>(got),
                   std::span<const std::size_t>(recv_counts));
    std::size_t at = 0;
    for (int j = 0; j < n; ++j) {
      // Member j's block for me starts after its blocks for members 0 .. me-1.
      std::size_t offset = 0;
      for (int k = 0; k < me; ++k) offset += elements(j, k);
      const std::vector<float> theirs = inputs(j, offset + recv_counts[j], false);
      if (recv_counts[j] && std::memcmp(got.data() + at, theirs.data() + offset, recv_counts[j] * 4) != 0)
        return where(c, "all_to_all_v", count) + ": block from member " + std::to_string(j);
      at += recv_counts[j];
    }
  }
  c.barrier();
  {
    // A pipeline chain: each member forwards to the next and receives from the previous.
    std::vector<float> got(count);
    if (me > 0) c.recv(std::span<float>(got), me - 1);
    if (me + 1 < n) c.send(std::span<const float>(inputs(me, count, false)), me + 1);
    if (me > 0 && got != inputs(me - 1, count, false))
      return where(c, "send/recv", count) + ": data from the previous stage differs";
  }
  return {};
}

}  // namespace mactor::comm::testing
