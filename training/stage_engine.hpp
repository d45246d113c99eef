// One rank's share of the training step: its model chunks, the schedule it runs them by (the
// asynchronous port of schedules/README.md: transfers are posted, compute waits for its input),
// the gradient finalization (tied embeddings, data-parallel all-reduce or reduce-scatter) and the
// optimizer (whole, or Megatron's distributed optimizer over the data-parallel group).
// Knows no actor: a driver calls pump() until it reports the schedule finished, and is woken by
// the wakeup callback when a transfer completes (an actor turns that into a message).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensor/host_buffer.hpp"
#include "config/megatron_args.hpp"
#include "model/gpt_chunk.hpp"
#include "model/optimizer.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule.hpp"
#include "training/batch_loader.hpp"
#include "training/comm_worker.hpp"
#include "training/parallel_context.hpp"
#include "training/step_timers.hpp"

namespace mactor::training {

/// The layers of every local chunk of pipeline rank `pp_rank`: chunk c runs virtual stage
/// c * pp + pp_rank, each virtual stage an equal run of num_layers / (pp * vp) layers.
std::vector<model::chunk_layout> chunk_layouts(int num_layers, int pp, int vp, int pp_rank);

/// One operation of the last schedule on this rank, for timelines and the bubble benchmark.
struct timeline_entry {
  schedules::action what;
  double start_s = 0, end_s = 0;  ///< seconds since the schedule began
  bool waiting = false;           ///< true: time spent waiting for this action's input
};

class stage_engine {
 public:
  stage_engine(const config::megatron_args& args, parallel_context& ctx, std::int64_t padded_vocab_size);
  ~stage_engine();
  stage_engine(const stage_engine&) = delete;
  stage_engine& operator=(const stage_engine&) = delete;

  /// Called from any thread when a transfer completes; the driver then calls pump() again.
  void set_wakeup(std::function<void()> wakeup) { wakeup_ = std::move(wakeup); }

  /// Starts one pass of the schedule over `num_microbatches` micro-batches read from `loader`
  /// at `consumed` samples: forward and backward (training) or forward only (evaluation).
  void begin_schedule(bool forward_only, const batch_loader& loader, std::int64_t consumed,
                      int num_microbatches, bool cyclic);
  /// Runs actions until one has to wait for a transfer; true once the schedule and every send
  /// have finished. Throws comm::comm_error naming the peer of a failed transfer.
  bool pump();
  /// Loss sum and token count of the last schedule, on the last pipeline stage (zero elsewhere).
  model::loss_and_count loss_totals() const { return totals_; }
  /// What the schedule is doing or waiting for right now, e.g. "awaiting recv_backward mb 7
  /// chunk 1 from rank 12", and since when.
  std::pair<std::string, std::chrono::steady_clock::time_point> activity() const;
  /// The last finished schedule's operations.
  std::vector<timeline_entry> last_timeline() const;
  /// Data-plane bytes this rank has sent and received so far: pipeline transfers and every
  /// group's collectives (the transport's count of completed operations). Any thread.
  std::int64_t bytes_sent() const;
  std::int64_t bytes_received() const;

  void zero_grad();
  /// The tensor-parallel sum of sequence-parallel gradients (with --sequence-parallel), the
  /// tied-embedding gradient sum between the first and last stage, then the data-parallel mean
  /// (all-reduce, or reduce-scatter into this rank's shard with the distributed optimizer).
  void finalize_grads();
  /// Clip, count zeros, update (and all-gather the parameters with the distributed optimizer).
  model::optimizer_step_result optimizer_step(double clip_grad, bool count_zeros);
  /// The L2 norm of all parameters of the model (every rank gets it).
  double params_norm();
  /// Waits for parameter all-gathers still running in the background (--overlap-param-gather):
  /// call before reading the parameters outside the schedule (checkpoints).
  void sync_params();
  /// Gradient buckets reduced in the background during the last backward (--overlap-grad-reduce).
  std::size_t num_grad_buckets() const { return buckets_.size(); }
  model::optimizer& optimizer() { return *optimizer_; }
  /// The training timers (--timing-log-level) of this rank: compute, waits, gradient sync and
  /// optimizer parts, recorded for training schedules only (Megatron stops its timers in evaluate).
  step_timers& timers() { return timers_; }

  std::vector<model::gpt_chunk<float>>& chunks() { return chunks_; }
  bool is_last_stage() const;
  bool is_first_stage() const;
  int num_microbatches_in_flight() const;

 private:
  struct transfer;
  struct chunk_shard;
  // --overlap-grad-reduce: a contiguous run [begin, end) of one chunk's flat gradient buffer,
  // reduced as soon as the last micro-batch's backward has finished every parameter in it (the
  // bucket's earliest backward event has fired: events run from the final norm down to the
  // embedding).
  struct grad_bucket {
    std::size_t chunk = 0, begin = 0, end = 0;
    int ready_event = 0;
    int tied_embedding = -1;  // the tied word embedding's id here: summed across stages first
  };
  void build_grad_buckets(std::int64_t bucket_size);
  void reduce_bucket(const grad_bucket& b);
  void reduce_over_replicas(std::size_t chunk, std::size_t begin, std::size_t end);
  void launch_ready_buckets(int chunk, int fired_event);
  bool execute(const schedules::action& a);
  const batch_buffers& batch(int microbatch);
  void post_recv(const schedules::action& a, bool gradient);
  void post_send(const schedules::action& a, bool gradient);
  transfer* arrived(const schedules::action& a, bool gradient);
  comm::completion completion_of(transfer* t);
  void check(const transfer& t) const;
  std::uint64_t tag(bool gradient, int virtual_stage, int microbatch) const;
  void set_activity(std::string what);
  /// Waits for the background collectives; `what` (e.g. "the overlapped gradient reduction")
  /// is the activity meanwhile, with the collective in progress named.
  void wait_background(const std::string& what);
  void reduce_stats(std::span<double> values);

  const config::megatron_args& args_;
  parallel_context& ctx_;
  int pp_, vp_, pp_rank_, dp_, dp_rank_, mbs_;
  bool distributed_optimizer_;
  std::vector<model::gpt_chunk<float>> chunks_;
  std::vector<chunk_shard> shards_;
  std::unique_ptr<model::optimizer> optimizer_;
  // --overlap-grad-reduce / --overlap-param-gather: the buckets, the background collective
  // thread, and what it still owes.
  std::vector<grad_bucket> buckets_;
  std::size_t next_bucket_ = 0;
  std::unique_ptr<comm_worker> comm_;
  bool overlap_param_gather_ = false, params_pending_ = false;
  std::function<void()> wakeup_;
  step_timers timers_;

  // The schedule in progress.
  std::optional<schedules::generator<schedules::action>> schedule_;
  std::optional<schedules::action> pending_;
  bool forward_only_ = false, cyclic_ = false;
  const batch_loader* loader_ = nullptr;
  std::int64_t consumed_ = 0;
  int num_microbatches_ = 0;
  std::map<int, batch_buffers> batches_;
  std::map<std::tuple<bool, int, int>, std::unique_ptr<transfer>> recvs_;    // (gradient, mb, chunk)
  std::map<std::tuple<bool, int, int>, tensor::host_vector<float>> outputs_;         // waiting for their send
  std::vector<std::unique_ptr<transfer>> sends_;
  model::loss_and_count totals_;
  std::chrono::steady_clock::time_point schedule_start_;
  std::optional<std::chrono::steady_clock::time_point> wait_start_;
  std::vector<timeline_entry> timeline_, last_timeline_;
  mutable std::mutex activity_mutex_;
  std::string activity_ = "idle";
  std::string background_wait_;  // what wait_background waits for (empty: not waiting)
  std::chrono::steady_clock::time_point activity_since_ = std::chrono::steady_clock::now();
};

}  // namespace mactor::training
