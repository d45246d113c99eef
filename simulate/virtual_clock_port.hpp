// The simulated port: executes one pipeline rank's schedule actions on a virtual clock. Compute
// takes the cost model's time; sends and receives are posts that meet on a link shared with the
// neighbour's port, matched in order per link and direction (schedules/README.md guarantees the
// order); a forward or backward waits until the transfer of its input has arrived.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "schedules/action.hpp"
#include "schedules/schedule_shape.hpp"
#include "simulate/cost_model.hpp"

namespace mactor::simulate {

/// One span of the simulated timeline, for the trace file.
struct timeline_span {
  int rank = 0;
  std::string lane;  ///< "compute", "pp send activations", "pp send gradients", "dp"
  std::string name;  ///< the action's text (F3.1, SF3.1, ...) or what the span is
  double start_s = 0;
  double duration_s = 0;
};

/// The transfers between pipeline ranks: one FIFO per (from rank, to rank, direction).
/// Transfer k of a link starts once its send and its receive are both posted and transfer k - 1
/// of the same link is done, and takes `seconds`.
class link_table {
 public:
  explicit link_table(double seconds) : seconds_(seconds) {}

  using key = std::tuple<int, int, bool>;  ///< (from, to, carries activations)
  /// Posts a send (or receive) at time t; returns its index on the link.
  int post_send(const key& link, double t);
  int post_recv(const key& link, double t);
  /// When transfer `index` of `link` has arrived, or nullopt while one side has not posted yet.
  std::optional<double> arrival(const key& link, int index);
  /// When the send of transfer `index` was posted (the transfer itself cannot start earlier).
  double send_posted(const key& link, int index) const { return links_.at(link).sends[std::size_t(index)]; }

 private:
  struct queue {
    std::vector<double> sends, recvs, arrivals;
  };
  double seconds_;
  std::map<key, queue> links_;
};

/// What one rank did in one iteration, in seconds of virtual time from the iteration's start.
struct rank_activity {
  double compute_end_s = 0;     ///< when its last forward/backward finished
  double pipeline_end_s = 0;    ///< ... and its last send arrived
  double busy_s = 0;            ///< time spent in forward and backward
  double exposed_tp_s = 0, exposed_cp_s = 0, exposed_ep_s = 0, exposed_pp_s = 0;
  double exposed_fsdp_s = 0;  ///< FSDP's gathers and reduce-scatters inside forwards and backwards
  std::vector<double> last_backward_start_s;  ///< per chunk: its last backward, whose start
  std::vector<double> grads_ready_s;          ///< and end bound when the chunk's gradients are ready
  double peak_activation_bytes = 0;       ///< most activation memory held at once
  int forwards = 0, backwards = 0;
};

/// The port of one pipeline rank. `try_execute` runs an action, or returns false (doing nothing)
/// when it must wait for a transfer the neighbour has not posted yet; call it again later.
class virtual_clock_port {
 public:
  virtual_clock_port(schedules::schedule_shape shape, const cost_model& costs, link_table& links,
                     std::vector<timeline_span>* timeline);

  bool try_execute(const schedules::action& a);
  /// Ends the iteration: waits for this rank's outstanding sends.
  void flush();
  const rank_activity& activity() const { return activity_; }

 private:
  link_table::key link_of(const schedules::action& a) const;
  bool run_compute(const schedules::action& a);
  bool run_weight_pass(const schedules::action& a);
  void note_memory(double extra_bytes);

  schedules::schedule_shape shape_;
  const cost_model& costs_;
  link_table& links_;
  std::vector<timeline_span>* timeline_;
  double clock_ = 0;
  rank_activity activity_;
  std::map<std::tuple<schedules::op, int, int>, int> posted_recvs_;  ///< (op, mb, chunk) -> link index
  std::vector<std::pair<link_table::key, int>> sends_;
  std::vector<int> in_flight_;       ///< per chunk: microbatches forwarded, not yet backwarded (ZB-H1: W run)
  std::vector<int> backwards_done_;  ///< per chunk
};

}  // namespace mactor::simulate
