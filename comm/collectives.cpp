// Ring collectives over a transport. Each reduced chunk is summed by exactly one member in a
// fixed ring order and then copied to the others, so every member ends with the same bits.
#include "comm/collectives.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace mactor::comm {
namespace {

constexpr std::uint32_t seq_bits = 22;
constexpr std::uint32_t collective_seq_limit = 1u << (seq_bits - 1);  // p2p uses the upper half
constexpr std::uint32_t p2p_seq = collective_seq_limit;

// Boundaries of n nearly equal chunks of `count` elements: chunk i is [b[i], b[i+1]).
std::vector<std::size_t> chunk_bounds(std::size_t count, int n) {
  std::vector<std::size_t> b(n + 1);
  for (int i = 0; i <= n; ++i) b[i] = count * static_cast<std::size_t>(i) / n;
  return b;
}

int wrap(int i, int n) { return ((i % n) + n) % n; }

// A receive abandoned by a timeout may still land in its scratch buffer later, so the buffer
// is kept for the rest of the process instead of freed (the failure is fatal anyway).
void retire_scratch(std::shared_ptr<void> buffer) {
  static std::mutex mu;
  static std::vector<std::shared_ptr<void>> retired;
  std::lock_guard lock(mu);
  retired.push_back(std::move(buffer));
}

void check_size(bool ok, const std::string& what) {
  if (!ok) throw comm_error(-1, what);
}

}  // namespace

transport_communicator::transport_communicator(transport& t, std::vector<int> members,
                                               std::uint32_t group_id,
                                               std::chrono::milliseconds timeout)
    : transport_(t), members_(std::move(members)), group_id_(group_id & 0x1FFFF), timeout_(timeout) {
  for (std::size_t i = 0; i < members_.size(); ++i)
    if (members_[i] == transport_.rank()) position_ = static_cast<int>(i);
  if (position_ < 0)
    throw comm_error(transport_.rank(), "rank " + std::to_string(transport_.rank()) +
                                    " built a communicator for a group it is not a member of");
}

std::uint64_t transport_communicator::next_tag() {
  const std::uint64_t tag =
      collective_tag_bit | (std::uint64_t{group_id_} << seq_bits) | (seq_ % collective_seq_limit);
  ++seq_;
  return tag;
}

void transport_communicator::fail_timeout(int peer_position, const char* what) const {
  const int peer = members_[peer_position];
  throw comm_error(peer, std::string(what) + " with rank " + std::to_string(peer) +
                             " did not finish within " + std::to_string(timeout_.count()) +
                             " ms: that rank is hung or called a different collective");
}

void transport_communicator::wait(std::future<status>& f, int peer_position, const char* what) {
  if (!transport_.wait_for(f, timeout_)) fail_timeout(peer_position, what);
  wait_ok(f);
}

void transport_communicator::exchange(int to, const void* send_data, std::size_t send_size,
                                      int from, void* recv_data, std::size_t recv_size,
                                      std::uint64_t tag) {
  auto r = transport_.recv_future(members_[from], tag, recv_data, recv_size);
  auto s = transport_.send_future(members_[to], tag, send_data, send_size);
  wait(s, to, "sending");
  if (!transport_.wait_for(r, timeout_)) fail_timeout(from, "receiving");
  check_received(r.get(), recv_size);
}

void transport_communicator::check_received(const status& got, std::size_t expected) {
  if (!got.ok) throw comm_error(got.peer, got.message);
  if (got.bytes != expected)
    throw comm_error(got.peer, "rank " + std::to_string(got.peer) + " sent " + std::to_string(got.bytes) +
                                   " bytes where " + std::to_string(expected) +
                                   " were expected; the members called mismatched collectives");
}

// After this, chunk (me + offset + 1) holds the sum over the group. Step s sends chunk
// (me + offset - s) downstream and adds the chunk arriving from upstream into its own copy.
template <class T>
void transport_communicator::ring_reduce_scatter(T* data, const std::vector<std::size_t>& bounds,
                                                 int offset, std::uint64_t tag) {
  const int n = size();
  std::size_t largest = 0;
  for (int i = 0; i < n; ++i) largest = std::max(largest, bounds[i + 1] - bounds[i]);
  // The scratch buffer persists across calls: fresh 8 MiB allocations cost page faults.
  if (scratch_.size() < largest * sizeof(T)) scratch_.resize(largest * sizeof(T));
  T* incoming = reinterpret_cast<T*>(scratch_.data());
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = wrap(position_ + offset - s, n);
    const int recv_chunk = wrap(position_ + offset - s - 1, n);
    const std::size_t send_count = bounds[send_chunk + 1] - bounds[send_chunk];
    const std::size_t recv_count = bounds[recv_chunk + 1] - bounds[recv_chunk];
    try {
      exchange(next(), data + bounds[send_chunk], send_count * sizeof(T), prev(),
               incoming, recv_count * sizeof(T), tag);
    } catch (...) {
      retire_scratch(std::make_shared<tensor::host_vector<std::byte>>(std::move(scratch_)));
      scratch_ = {};
      throw;
    }
    T* acc = data + bounds[recv_chunk];
    for (std::size_t i = 0; i < recv_count; ++i) acc[i] = incoming[i] + acc[i];
  }
}

// Starting from each member owning chunk (me + offset + 1), passes chunks around the ring
// until everyone has all of them. `bounds` are in bytes.
void transport_communicator::ring_all_gather(std::byte* data,
                                             const std::vector<std::size_t>& bounds, int offset,
                                             std::uint64_t tag) {
  const int n = size();
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = wrap(position_ + offset + 1 - s, n);
    const int recv_chunk = wrap(position_ + offset - s, n);
    exchange(next(), data + bounds[send_chunk], bounds[send_chunk + 1] - bounds[send_chunk],
             prev(), data + bounds[recv_chunk], bounds[recv_chunk + 1] - bounds[recv_chunk], tag);
  }
}

template <class T>
void transport_communicator::all_reduce_impl(std::span<T> data) {
  const std::uint64_t tag = next_tag();
  const int n = size();
  if (n == 1) return;
  const auto bounds = chunk_bounds(data.size(), n);
  ring_reduce_scatter(data.data(), bounds, 0, tag);
  std::vector<std::size_t> byte_bounds(bounds.size());
  for (std::size_t i = 0; i < bounds.size(); ++i) byte_bounds[i] = bounds[i] * sizeof(T);
  ring_all_gather(reinterpret_cast<std::byte*>(data.data()), byte_bounds, 0, tag);
}

template <class T>
void transport_communicator::reduce_scatter_impl(std::span<const T> in, std::span<T> out) {
  const int n = size();
  check_size(in.size() == out.size() * static_cast<std::size_t>(n),
             "reduce_scatter: input has " + std::to_string(in.size()) + " elements but needs " +
                 std::to_string(n) + " x " + std::to_string(out.size()) +
                 " (group size x output size)");
  const std::uint64_t tag = next_tag();
  tensor::host_vector<T> work(in.begin(), in.end());
  const auto bounds = chunk_bounds(work.size(), n);
  ring_reduce_scatter(work.data(), bounds, -1, tag);
  std::copy(work.begin() + bounds[position_], work.begin() + bounds[position_ + 1], out.begin());
}

void transport_communicator::all_reduce(std::span<float> data) { all_reduce_impl(data); }
void transport_communicator::all_reduce(std::span<double> data) { all_reduce_impl(data); }
void transport_communicator::reduce_scatter(std::span<const float> in, std::span<float> out) {
  reduce_scatter_impl(in, out);
}
void transport_communicator::reduce_scatter(std::span<const double> in, std::span<double> out) {
  reduce_scatter_impl(in, out);
}

void transport_communicator::all_gather_bytes(std::span<const std::byte> in,
                                              std::span<std::byte> out) {
  const int n = size();
  check_size(out.size() == in.size() * static_cast<std::size_t>(n),
             "all_gather: output has " + std::to_string(out.size()) + " bytes but needs " +
                 std::to_string(n) + " x " + std::to_string(in.size()));
  const std::uint64_t tag = next_tag();
  if (!in.empty()) std::memcpy(out.data() + in.size() * position_, in.data(), in.size());
  ring_all_gather(out.data(), chunk_bounds(out.size(), n), -1, tag);
}

void transport_communicator::broadcast_bytes(std::span<std::byte> data, int root) {
  check_size(root >= 0 && root < size(), "broadcast: root " + std::to_string(root) +
                                             " is not a position in a group of " +
                                             std::to_string(size()));
  const std::uint64_t tag = next_tag();
  if (position_ != root) {
    auto r = transport_.recv_future(members_[root], tag, data.data(), data.size());
    wait(r, root, "broadcast");
    return;
  }
  std::vector<std::future<status>> sends;
  for (int p = 0; p < size(); ++p)
    if (p != root)
      sends.push_back(transport_.send_future(members_[p], tag, data.data(), data.size()));
  for (int p = 0, i = 0; p < size(); ++p)
    if (p != root) wait(sends[i++], p, "broadcast");
}

void transport_communicator::all_to_all_bytes(std::span<const std::byte> in,
                                              std::span<std::byte> out) {
  const int n = size();
  check_size(in.size() == out.size() && in.size() % n == 0,
             "all_to_all: input and output must be the same size, a multiple of the group size " +
                 std::to_string(n) + " (got " + std::to_string(in.size()) + " and " +
                 std::to_string(out.size()) + " bytes)");
  const std::uint64_t tag = next_tag();
  const std::size_t block = in.size() / n;
  std::vector<std::future<status>> recvs, sends;
  for (int k = 1; k < n; ++k) {
    const int from = wrap(position_ - k, n);
    recvs.push_back(transport_.recv_future(members_[from], tag, out.data() + block * from, block));
  }
  for (int k = 1; k < n; ++k) {
    const int to = wrap(position_ + k, n);
    sends.push_back(transport_.send_future(members_[to], tag, in.data() + block * to, block));
  }
  if (block) std::memcpy(out.data() + block * position_, in.data() + block * position_, block);
  for (int k = 1; k < n; ++k) wait(sends[k - 1], wrap(position_ + k, n), "all_to_all");
  for (int k = 1; k < n; ++k) wait(recvs[k - 1], wrap(position_ - k, n), "all_to_all");
}

void transport_communicator::all_to_all_v_bytes(std::span<const std::byte> in,
                                                std::span<const std::size_t> send_counts,
                                                std::span<std::byte> out,
                                                std::span<const std::size_t> recv_counts) {
  const int n = size();
  std::vector<std::size_t> send_at(n + 1, 0), recv_at(n + 1, 0);
  check_size(send_counts.size() == std::size_t(n) && recv_counts.size() == std::size_t(n),
             "all_to_all_v: " + std::to_string(send_counts.size()) + " send and " +
                 std::to_string(recv_counts.size()) + " receive counts for a group of " + std::to_string(n));
  for (int j = 0; j < n; ++j) {
    send_at[j + 1] = send_at[j] + send_counts[j];
    recv_at[j + 1] = recv_at[j] + recv_counts[j];
  }
  check_size(send_at[n] <= in.size() && recv_at[n] <= out.size(),
             "all_to_all_v: the counts add up to " + std::to_string(send_at[n]) + " bytes to send and " +
                 std::to_string(recv_at[n]) + " to receive, but the buffers hold " + std::to_string(in.size()) +
                 " and " + std::to_string(out.size()));
  check_size(send_counts[position_] == recv_counts[position_],
             "all_to_all_v: this member sends itself " + std::to_string(send_counts[position_]) +
                 " bytes but expects " + std::to_string(recv_counts[position_]));
  const std::uint64_t tag = next_tag();
  // Every pair exchanges a message, empty or not, so a count mismatch is caught on arrival.
  std::vector<std::future<status>> recvs, sends;
  for (int k = 1; k < n; ++k) {
    const int from = wrap(position_ - k, n);
    recvs.push_back(transport_.recv_future(members_[from], tag, out.data() + recv_at[from], recv_counts[from]));
  }
  for (int k = 1; k < n; ++k) {
    const int to = wrap(position_ + k, n);
    sends.push_back(transport_.send_future(members_[to], tag, in.data() + send_at[to], send_counts[to]));
  }
  if (send_counts[position_])
    std::memcpy(out.data() + recv_at[position_], in.data() + send_at[position_], send_counts[position_]);
  for (int k = 1; k < n; ++k) wait(sends[k - 1], wrap(position_ + k, n), "all_to_all_v");
  for (int k = 1; k < n; ++k) {
    const int from = wrap(position_ - k, n);
    if (!transport_.wait_for(recvs[k - 1], timeout_)) fail_timeout(from, "all_to_all_v");
    const status got = recvs[k - 1].get();
    if (!got.ok) throw comm_error(got.peer, got.message);
    if (got.bytes != recv_counts[from])
      throw comm_error(got.peer, "all_to_all_v: rank " + std::to_string(got.peer) + " sent " +
                                     std::to_string(got.bytes) + " bytes where " +
                                     std::to_string(recv_counts[from]) + " were expected");
  }
}

// Dissemination barrier: ceil(log2 n) rounds; in round k each member signals me + 2^k.
void transport_communicator::barrier() {
  const std::uint64_t tag = next_tag();
  const int n = size();
  unsigned char out = 1, in = 0;
  for (int d = 1; d < n; d *= 2)
    exchange(wrap(position_ + d, n), &out, 1, wrap(position_ - d, n), &in, 1, tag);
}

void transport_communicator::send_bytes(std::span<const std::byte> data, int peer) {
  const std::uint64_t tag = collective_tag_bit | (std::uint64_t{group_id_} << seq_bits) | p2p_seq;
  auto s = transport_.send_future(members_.at(peer), tag, data.data(), data.size());
  wait(s, peer, "send");
}

void transport_communicator::recv_bytes(std::span<std::byte> data, int peer) {
  const std::uint64_t tag = collective_tag_bit | (std::uint64_t{group_id_} << seq_bits) | p2p_seq;
  auto r = transport_.recv_future(members_.at(peer), tag, data.data(), data.size());
  if (!transport_.wait_for(r, timeout_)) fail_timeout(peer, "receive");
  const status got = r.get();
  if (!got.ok) throw comm_error(got.peer, got.message);
  if (got.bytes != data.size())
    throw comm_error(got.peer, "rank " + std::to_string(got.peer) + " sent " +
                                   std::to_string(got.bytes) + " bytes where " +
                                   std::to_string(data.size()) + " were expected");
}

}  // namespace mactor::comm
