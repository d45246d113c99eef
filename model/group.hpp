// The collective interface model/ needs from a tensor-parallel group. Layers call it with
// tensors; an implementation provides the typed collectives (float and double buffers today):
// comm/ provides real ones; single_group is the tp=1 case.
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

/// A ring step group::start_ring_shift posted: test() moves it along from the calling thread
/// without blocking and says whether it is done; wait() returns once it is, throwing what it
/// failed with.
using pending_shift = comm::pending_exchange;

class group {
 public:
  virtual ~group() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;

  /// data = sum over ranks of data, in place.
  void all_reduce_sum(tensor::tensor_view data);
  /// out = concatenation of every rank's in, in rank order (out holds size() * in.numel()).
  void all_gather(tensor::const_tensor_view in, tensor::tensor_view out);
  /// out = this rank's block of the sum over ranks of in (in holds size() * out.numel()).
  void reduce_scatter_sum(tensor::const_tensor_view in, tensor::tensor_view out);

  /// data[n] = the largest over ranks of data[n], in place (std::fmax: a NaN is passed over):
  /// an all-gather, then the maximum. Transformer Engine's amax all-reduce (ReduceOp.MAX).
  void all_reduce_max(float* data, std::size_t n);

  /// data[n] = sum over ranks of data[n], in place.
  virtual void all_reduce_sum(float* data, std::size_t n) = 0;
  virtual void all_reduce_sum(double* data, std::size_t n) = 0;
  /// out[size * n] = concatenation of every rank's in[n], in rank order.
  virtual void all_gather(const float* in, float* out, std::size_t n) = 0;
  virtual void all_gather(const double* in, double* out, std::size_t n) = 0;
  /// out[n] = sum over ranks of in[rank() * n .. (rank() + 1) * n).
  virtual void reduce_scatter_sum(const float* in, float* out, std::size_t n) = 0;
  virtual void reduce_scatter_sum(const double* in, double* out, std::size_t n) = 0;

  /// Rows of any dtype to every rank: in holds send_rows[q] rows for rank q, in rank order;
  /// out receives recv_rows[q] rows from rank q, in rank order (each rank's send_rows[r] must
  /// equal rank r's recv_rows for it); a row is `width` elements. The MoE token exchange.
  void all_to_all_v(tensor::const_tensor_view in, const std::vector<std::int64_t>& send_rows,
                    tensor::tensor_view out, const std::vector<std::int64_t>& recv_rows, std::int64_t width);
  /// The byte-level exchange all_to_all_v runs; a group of one copies, and the default of a
  /// larger group throws std::logic_error (a group without the collective).
  virtual void all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                                  std::span<const std::size_t> recv_bytes);
  /// One step of a ring: send[n bytes] goes to rank (rank() + step) % size() and recv[n bytes]
  /// arrives from rank (rank() - step) % size() (every rank calls it with the same step, 1 or
  /// -1; an all_to_all_v_bytes with one non-empty block each way). Context parallelism's ring
  /// attention passes its KV blocks so.
  void ring_shift_bytes(const std::byte* send, std::byte* recv, std::size_t n, int step = 1);
  /// ring_shift_bytes without waiting: the caller computes meanwhile, calling test() between
  /// pieces of work, and wait() before it reads recv (send and recv stay in use until then).
  /// `what` describes the wait as labelled() does, its {peer} being the member recv comes
  /// from. The default runs ring_shift_bytes, so labelled, on a thread of its own; a group on
  /// a transport posts both halves and lets test() drive them, needing no thread.
  virtual std::unique_ptr<pending_shift> start_ring_shift(const std::byte* send, std::byte* recv, std::size_t n,
                                                          int step, std::string what);
  /// Runs `exchange` (calls on this group from the calling thread) described, for whoever
  /// watches the group (the inspector, the stall report), as `what`: "{peer}" there stands for
  /// member `peer` of the group ("KV block 2 of 3 from {peer} in ring attention"). The default
  /// just runs it.
  virtual void labelled(const std::string& what, int peer, const std::function<void()>& exchange) {
    (void)what, (void)peer;
    exchange();
  }

  /// Megatron's hierarchical context-parallel groups (--hierarchical-context-parallel-sizes,
  /// level 0 first; comm::process_groups::hierarchical_cp_groups) when this is the
  /// context-parallel group and they were built (for --cp-comm-type a2a+p2p); empty otherwise.
  const std::vector<group*>& levels() const { return levels_; }
  void set_levels(std::vector<group*> levels) { levels_ = std::move(levels); }

 private:
  std::vector<group*> levels_;
};

/// A group of one rank: every collective is a copy or nothing.
class single_group final : public group {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  void all_reduce_sum(float*, std::size_t) override {}
  void all_reduce_sum(double*, std::size_t) override {}
  void all_gather(const float* in, float* out, std::size_t n) override { std::copy_n(in, n, out); }
  void all_gather(const double* in, double* out, std::size_t n) override {
    std::copy_n(in, n, out);
  }
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override {
    std::copy_n(in, n, out);
  }
  void reduce_scatter_sum(const double* in, double* out, std::size_t n) override {
    std::copy_n(in, n, out);
  }
};

}  // namespace mactor::model
