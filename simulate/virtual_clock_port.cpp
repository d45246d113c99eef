// The simulated port and the links between simulated ports.
#include "simulate/virtual_clock_port.hpp"

#include <algorithm>
#include <string>

namespace mactor::simulate {

namespace sch = mactor::schedules;

int link_table::post_send(const key& link, double t) {
  auto& q = links_[link];
  q.sends.push_back(t);
  return static_cast<int>(q.sends.size()) - 1;
}

int link_table::post_recv(const key& link, double t) {
  auto& q = links_[link];
  q.recvs.push_back(t);
  return static_cast<int>(q.recvs.size()) - 1;
}

std::optional<double> link_table::arrival(const key& link, int index) {
  auto& q = links_[link];
  const auto i = static_cast<std::size_t>(index);
  if (i >= q.sends.size() || i >= q.recvs.size()) return std::nullopt;
  // Both sides post in the same order, so every earlier transfer of this link is matched too.
  while (q.arrivals.size() <= i) {
    const std::size_t k = q.arrivals.size();
    const double link_free = k ? q.arrivals[k - 1] : 0.0;
    // A link from a rank to itself (the turn of ZB-V's V) hands the tensor over in no time.
    const double travel = std::get<0>(link) == std::get<1>(link) ? 0.0 : seconds_;
    q.arrivals.push_back(std::max({q.sends[k], q.recvs[k], link_free}) + travel);
  }
  return q.arrivals[i];
}

virtual_clock_port::virtual_clock_port(sch::schedule_shape shape, const cost_model& costs, link_table& links,
                                       std::vector<timeline_span>* timeline)
    : shape_(shape), costs_(costs), links_(links), timeline_(timeline) {
  const std::size_t chunks = costs.chunks[std::size_t(shape.pipeline_rank)].size();
  activity_.grads_ready_s.assign(chunks, 0.0);
  activity_.last_backward_start_s.assign(chunks, 0.0);
  in_flight_.assign(chunks, 0);
  backwards_done_.assign(chunks, 0);
}

link_table::key virtual_clock_port::link_of(const sch::action& a) const {
  const int pp = shape_.pipeline_model_parallel_size, r = shape_.pipeline_rank;
  const int stage = sch::virtual_stage(shape_, a.chunk);
  // The rank of virtual stage stage + step under the schedule's placement.
  const auto rank_at = [&](int step) { return config::position_of_stage(sch::placement(shape_), pp, stage + step).rank; };
  switch (a.kind) {
    case sch::op::send_forward: return {r, rank_at(1), true};
    case sch::op::recv_forward: return {rank_at(-1), r, true};
    case sch::op::send_backward: return {r, rank_at(-1), false};
    case sch::op::recv_backward: return {rank_at(1), r, false};
    default: break;
  }
  return {r, r, true};
}

bool virtual_clock_port::try_execute(const sch::action& a) {
  switch (a.kind) {
    case sch::op::send_forward:
    case sch::op::send_backward:
      sends_.emplace_back(link_of(a), links_.post_send(link_of(a), clock_));
      return true;
    case sch::op::recv_forward:
    case sch::op::recv_backward:
      posted_recvs_[{a.kind, a.microbatch, a.chunk}] = links_.post_recv(link_of(a), clock_);
      return true;
    case sch::op::forward:
    case sch::op::backward:
    case sch::op::backward_weight: return run_compute(a);
  }
  return true;
}

bool virtual_clock_port::run_compute(const sch::action& a) {
  const bool forward = a.kind == sch::op::forward;
  if (a.kind == sch::op::backward_weight) return run_weight_pass(a);
  double start = clock_;
  const auto recv = posted_recvs_.find({forward ? sch::op::recv_forward : sch::op::recv_backward, a.microbatch, a.chunk});
  if (recv != posted_recvs_.end()) {
    const auto link = link_of({std::get<0>(recv->first), a.microbatch, a.chunk});
    const auto arrived = links_.arrival(link, recv->second);
    if (!arrived) return false;  // the neighbour has not sent it yet
    // Waiting for the producer is bubble; waiting for the bytes to travel is exposed p2p.
    const double data_ready_without_transfer = std::max(clock_, links_.send_posted(link, recv->second));
    activity_.exposed_pp_s += std::max(0.0, *arrived - data_ready_without_transfer);
    start = std::max(start, *arrived);
    posted_recvs_.erase(recv);
  }
  const chunk_cost& c = costs_.chunks[std::size_t(shape_.pipeline_rank)][std::size_t(a.chunk)];
  // A split backward (ZB-H1, ZB-V) leaves the weight gradients to the W pass.
  const bool split = sch::splits_backward(shape_);
  const double duration = forward ? c.forward_s : split ? c.backward_s - c.weight_grad_s : c.backward_s;
  activity_.exposed_tp_s += forward ? c.forward_tp_s : c.backward_tp_s;
  activity_.exposed_cp_s += forward ? c.forward_cp_s : c.backward_cp_s;
  activity_.exposed_ep_s += forward ? c.forward_ep_s : c.backward_ep_s;
  activity_.exposed_fsdp_s += forward ? c.forward_fsdp_s : c.backward_fsdp_s;
  activity_.busy_s += duration;
  const auto chunk = std::size_t(a.chunk);
  if (forward) {
    ++in_flight_[chunk];
    ++activity_.forwards;
    note_memory(0);
  } else {
    note_memory(c.backward_transient_bytes);
    if (!split) --in_flight_[chunk];  // a split backward's inputs stay until its W pass
    ++activity_.backwards;
    if (++backwards_done_[chunk] == shape_.num_microbatches) {
      activity_.last_backward_start_s[chunk] = start;
      activity_.grads_ready_s[chunk] = start + duration;
    }
  }
  if (timeline_) timeline_->push_back({shape_.pipeline_rank, "compute", sch::to_string(a), start, duration});
  clock_ = start + duration;
  activity_.compute_end_s = clock_;
  return true;
}

// ZB-H1's W: the weight-gradient GEMMs of a backward that ran earlier, with no input to wait for.
bool virtual_clock_port::run_weight_pass(const sch::action& a) {
  const chunk_cost& c = costs_.chunks[std::size_t(shape_.pipeline_rank)][std::size_t(a.chunk)];
  const auto chunk = std::size_t(a.chunk);
  const double start = clock_, duration = c.weight_grad_s;
  activity_.busy_s += duration;
  --in_flight_[chunk];
  if (a.microbatch == shape_.num_microbatches - 1) activity_.grads_ready_s[chunk] = start + duration;
  if (timeline_) timeline_->push_back({shape_.pipeline_rank, "compute", sch::to_string(a), start, duration});
  clock_ = start + duration;
  activity_.compute_end_s = clock_;
  return true;
}

void virtual_clock_port::note_memory(double extra_bytes) {
  double held = extra_bytes;
  const auto& chunks = costs_.chunks[std::size_t(shape_.pipeline_rank)];
  for (std::size_t c = 0; c < chunks.size(); ++c) held += in_flight_[c] * chunks[c].activation_bytes;
  activity_.peak_activation_bytes = std::max(activity_.peak_activation_bytes, held);
}

void virtual_clock_port::flush() {
  double end = clock_;
  for (const auto& [link, index] : sends_) {
    const auto arrived = links_.arrival(link, index);
    if (!arrived) continue;  // the receiver never posts: a schedule bug the driver reports
    end = std::max(end, *arrived);
    // One lane per link: a link's transfers never overlap one another.
    const bool activations = std::get<2>(link);
    if (timeline_)
      timeline_->push_back({shape_.pipeline_rank, activations ? "pp send activations" : "pp send gradients",
                            "to rank " + std::to_string(std::get<1>(link)), *arrived - costs_.p2p_seconds,
                            costs_.p2p_seconds});
  }
  activity_.exposed_pp_s += end - clock_;
  activity_.pipeline_end_s = end;
}

}  // namespace mactor::simulate
