// The tensor-parallel group of a profiled rank: every collective the model's layers run on it is
// also a span of the trace ("tensor-parallel all-reduce", with its bytes), recorded on the thread
// that runs it. Only a profiled rank with tp > 1 gets one; the others call the group directly.
#pragma once

#include <cstddef>

#include "model/group.hpp"
#include "training/trace_recorder.hpp"

namespace mactor::training {

class traced_group final : public model::group {
 public:
  traced_group(model::group& inner, trace_recorder& trace) : inner_(inner), trace_(trace) {}

  int size() const override { return inner_.size(); }
  int rank() const override { return inner_.rank(); }
  using model::group::all_gather;
  using model::group::all_reduce_sum;
  using model::group::reduce_scatter_sum;
  void all_reduce_sum(float* data, std::size_t n) override;
  void all_reduce_sum(double* data, std::size_t n) override;
  void all_gather(const float* in, float* out, std::size_t n) override;
  void all_gather(const double* in, double* out, std::size_t n) override;
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override;
  void reduce_scatter_sum(const double* in, double* out, std::size_t n) override;
  /// The experts' tensor-parallel exchange (MoE with --expert-tensor-parallel-size > 1).
  void all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                          std::span<const std::size_t> recv_bytes) override;
  void labelled(const std::string& what, int peer, const std::function<void()>& exchange) override {
    inner_.labelled(what, peer, exchange);
  }
  std::unique_ptr<model::pending_shift> start_ring_shift(const std::byte* send, std::byte* recv, std::size_t n,
                                                         int step, std::string what) override {
    return inner_.start_ring_shift(send, recv, n, step, std::move(what));
  }

 private:
  /// A span named `what` over a collective of `bytes` (this rank's buffer).
  trace_recorder::scope traced(const char* what, std::size_t bytes) {
    return trace_recorder::scope(trace_, what, "tensor_parallel",
                                 {{"bytes", static_cast<std::int64_t>(bytes)}, {"group_size", inner_.size()}});
  }

  model::group& inner_;
  trace_recorder& trace_;
};

}  // namespace mactor::training
