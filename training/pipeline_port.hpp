// The pipeline port: turns a schedule's transfer actions (recv_forward, send_forward,
// recv_backward, send_backward) into receives and sends posted on the data plane, and tells the
// engine when a compute action's input has arrived. It knows tags, peers and virtual stages;
// it knows nothing of models or optimizers. Sends are never awaited inside the schedule (that
// deadlocks 1F1B above the rendezvous threshold): their buffers live here until completion,
// and the schedule's end waits for them all. A transfer between two chunks of this rank (the
// turn of ZB-V's V) is handed over here, without the transport.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "comm/transport.hpp"
#include "config/pipeline_placement.hpp"
#include "schedules/action.hpp"
#include "tensor/tensor.hpp"
#include "training/trace_recorder.hpp"

namespace mactor::training {

/// Where this rank sits in its pipeline.
struct pipeline_position {
  int pipeline_size = 1;         ///< pp
  int pipeline_rank = 0;         ///< this rank's stage
  int virtual_size = 1;          ///< model chunks per rank (vp)
  std::vector<int> stage_ranks;  ///< the global rank of every pipeline rank of this pipeline
  /// Which pipeline rank and chunk run each virtual stage (the V shape under ZB-V).
  config::stage_placement placement = config::stage_placement::interleaved;
};

class pipeline_port {
 public:
  /// `transport` may be null when the pipeline has one stage (no transfers then). `wakeup` is
  /// called from any thread when a transfer completes.
  pipeline_port(comm::transport* transport, pipeline_position where, std::function<void()> wakeup);
  /// Waits (2 s at most) for transfers in flight, so none completes into freed memory.
  ~pipeline_port();
  pipeline_port(const pipeline_port&) = delete;
  pipeline_port& operator=(const pipeline_port&) = delete;

  /// Starts a schedule; training and evaluation (forward_only) transfers never match each other.
  void begin(bool forward_only);
  /// recv_forward / recv_backward: posts a receive of a tensor of `shape` and `type`.
  void post_recv(const schedules::action& a, tensor::shape_type shape, tensor::dtype type);
  /// Keeps a forward's output (or a backward's input gradient) until its send action.
  void keep_output(const schedules::action& compute, tensor::tensor output);
  /// send_forward / send_backward: sends what the matching compute action kept.
  void post_send(const schedules::action& a);
  /// A forward's activation or a backward's output gradient, once it has arrived; null while
  /// it has not. Throws comm::comm_error naming the peer when its transfer failed.
  tensor::tensor* input(const schedules::action& compute);
  /// Frees the input of a compute action that has run.
  void release_input(const schedules::action& compute);
  /// What a compute action waits for: "recv_forward mb 3 chunk 1 from rank 2 (virtual stage 4)".
  std::string awaited(const schedules::action& compute) const;
  /// At the schedule's end: the first send still in flight ("send of mb 7 chunk 0 to rank 3"),
  /// or nullopt once all have left, which also checks that every receive and kept output was
  /// used (throws std::logic_error otherwise) and clears the schedule's transfers.
  std::optional<std::string> unfinished_send();

  /// --profile: every transfer also goes to `trace` as a span from its post to its completion.
  void trace_into(trace_recorder* trace) { trace_ = trace; }

  /// The message tag of a transfer into `virtual_stage`: the stage that consumes it.
  static std::uint64_t tag(bool gradient, bool forward_only, int virtual_stage, int microbatch);

 private:
  struct transfer {
    tensor::tensor buffer;
    comm::status status;
    std::atomic<bool> done{false};
    int peer = -1;
    schedules::action what;
    std::uint64_t tag = 0;
    trace_recorder::clock::time_point posted, completed;  // completed is set before done
  };
  using key = std::tuple<bool, int, int>;  // (gradient, micro-batch, chunk)
  static key key_of(const schedules::action& a);
  int virtual_stage(int chunk) const {
    return config::virtual_stage_of(where_.placement, where_.pipeline_size, where_.pipeline_rank, chunk);
  }
  /// The virtual stage at the other end of transfer action `a`: the producer of what it
  /// receives, the consumer of what it sends.
  int other_stage(const schedules::action& a) const;
  config::stage_position position(int stage) const {
    return config::position_of_stage(where_.placement, where_.pipeline_size, stage);
  }
  bool local(int stage) const { return position(stage).rank == where_.pipeline_rank; }
  int peer_of(int stage) const { return where_.stage_ranks[std::size_t(position(stage).rank)]; }
  void hand_over_locally(const schedules::action& send, tensor::tensor buffer);
  comm::completion completion_of(transfer* t);
  void check(const transfer& t) const;
  bool outstanding() const;
  void trace(const transfer& t) const;

  comm::transport* transport_;
  pipeline_position where_;
  std::function<void()> wakeup_;
  bool forward_only_ = false;
  std::map<key, std::unique_ptr<transfer>> recvs_;
  std::map<key, tensor::tensor> outputs_;  // computed, waiting for their send action
  std::map<key, tensor::tensor> local_arrivals_;  // sent to a chunk of this rank before its receive
  std::vector<std::unique_ptr<transfer>> sends_;
  trace_recorder* trace_ = nullptr;
};

}  // namespace mactor::training
