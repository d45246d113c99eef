// The pipeline port: transfer actions to posted transfers, and arrivals back to the engine.
#include "training/pipeline_port.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

namespace mactor::training {

using schedules::action;
using schedules::op;

namespace {

const char* op_name(op kind) {
  switch (kind) {
    case op::forward: return "forward";
    case op::backward: return "backward";
    case op::recv_forward: return "recv_forward";
    case op::send_forward: return "send_forward";
    case op::recv_backward: return "recv_backward";
    case op::send_backward: return "send_backward";
    case op::backward_weight: return "backward_weight";
  }
  return "?";
}

std::string of(const action& a) {
  return "micro-batch " + std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk);
}

}  // namespace

pipeline_port::pipeline_port(comm::transport* transport, pipeline_position where, std::function<void()> wakeup)
    : transport_(transport), where_(std::move(where)), wakeup_(std::move(wakeup)) {
  if (static_cast<int>(where_.stage_ranks.size()) != where_.pipeline_size)
    throw std::invalid_argument("pipeline_port: " + std::to_string(where_.stage_ranks.size()) + " stage ranks for " +
                                std::to_string(where_.pipeline_size) + " stages");
}

bool pipeline_port::outstanding() const {
  for (const auto& [k, t] : recvs_)
    if (!t->done.load()) return true;
  for (const auto& t : sends_)
    if (!t->done.load()) return true;
  return false;
}

pipeline_port::~pipeline_port() {
  // Transfers still in flight (a failed schedule) must not complete into freed buffers: the
  // transport is closed by its owner after this; wait briefly for what is outstanding.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (outstanding() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

std::uint64_t pipeline_port::tag(bool gradient, bool forward_only, int virtual_stage, int microbatch) {
  return (std::uint64_t(gradient) << 38) | (std::uint64_t(forward_only) << 37) | (std::uint64_t(virtual_stage) << 24) |
         std::uint64_t(microbatch & 0xFFFFFF);
}

pipeline_port::key pipeline_port::key_of(const action& a) {
  const bool gradient = a.kind == op::backward || a.kind == op::recv_backward || a.kind == op::send_backward;
  return {gradient, a.microbatch, a.chunk};
}

// Activations flow to virtual stage v + 1, gradients back to v - 1 (a transfer action's).
int pipeline_port::other_stage(const action& a) const {
  const bool gradient = a.kind == op::recv_backward || a.kind == op::send_backward;
  const bool receive = a.kind == op::recv_forward || a.kind == op::recv_backward;
  return virtual_stage(a.chunk) + ((gradient == receive) ? 1 : -1);
}

void pipeline_port::begin(bool forward_only) { forward_only_ = forward_only; }

void pipeline_port::check(const transfer& t) const {
  if (!t.status.ok)
    throw comm::comm_error(t.peer, "pipeline " + std::string(op_name(t.what.kind)) + " of " + of(t.what) + " with rank " +
                                       std::to_string(t.peer) + " failed: " + t.status.message);
}

// Records the outcome in the transfer, then wakes the driver (runs on the transport's thread).
comm::completion pipeline_port::completion_of(transfer* t) {
  return [this, t](const comm::status& s) {
    t->completed = trace_recorder::clock::now();
    t->status = s;
    t->done.store(true, std::memory_order_release);
    if (wakeup_) wakeup_();
  };
}

void pipeline_port::post_recv(const action& a, tensor::shape_type shape, tensor::dtype type) {
  auto t = std::make_unique<transfer>();
  t->what = a;
  const bool gradient = a.kind == op::recv_backward;
  // Activations come from the previous virtual stage; gradients from the next one.
  const int producer = other_stage(a);
  t->peer = peer_of(producer);
  t->tag = tag(gradient, forward_only_, virtual_stage(a.chunk), a.microbatch);
  t->posted = trace_recorder::clock::now();
  transfer* raw = t.get();
  recvs_[key_of(a)] = std::move(t);
  if (local(producer)) {
    // Another chunk of this rank produces it: it may have been handed over already.
    if (auto it = local_arrivals_.find(key_of(a)); it != local_arrivals_.end()) {
      raw->buffer = std::move(it->second);
      local_arrivals_.erase(it);
      raw->completed = raw->posted;
      raw->done.store(true, std::memory_order_release);
    }
    return;
  }
  raw->buffer = tensor::tensor(std::move(shape), type, tensor::memory_kind::activations);
  transport_->recv(raw->peer, raw->tag, raw->buffer.data(), raw->buffer.nbytes(), completion_of(raw));
}

// The turn of a V: the output goes straight into the receive of the consuming chunk, or waits
// here for that receive to be posted.
void pipeline_port::hand_over_locally(const action& send, tensor::tensor buffer) {
  const bool gradient = send.kind == op::send_backward;
  const key consumer{gradient, send.microbatch, position(other_stage(send)).chunk};
  const auto it = recvs_.find(consumer);
  if (it == recvs_.end()) {
    local_arrivals_[consumer] = std::move(buffer);
    return;
  }
  it->second->buffer = std::move(buffer);
  it->second->completed = trace_recorder::clock::now();
  it->second->done.store(true, std::memory_order_release);
}

void pipeline_port::keep_output(const action& compute, tensor::tensor output) {
  outputs_[key_of(compute)] = std::move(output);
}

void pipeline_port::post_send(const action& a) {
  auto it = outputs_.find(key_of(a));
  if (it == outputs_.end())
    throw std::logic_error(std::string("schedule sends ") + op_name(a.kind) + " of " + of(a) + " before computing it");
  const int consumer = other_stage(a);
  if (local(consumer)) {
    hand_over_locally(a, std::move(it->second));
    outputs_.erase(it);
    return;
  }
  auto t = std::make_unique<transfer>();
  t->what = a;
  t->buffer = std::move(it->second);
  outputs_.erase(it);
  const bool gradient = a.kind == op::send_backward;
  t->peer = peer_of(consumer);
  t->tag = tag(gradient, forward_only_, consumer, a.microbatch);
  t->posted = trace_recorder::clock::now();
  transfer* raw = t.get();
  sends_.push_back(std::move(t));
  transport_->send(raw->peer, raw->tag, raw->buffer.data(), raw->buffer.nbytes(), completion_of(raw));
}

tensor::tensor* pipeline_port::input(const action& compute) {
  auto it = recvs_.find(key_of(compute));
  if (it == recvs_.end())
    throw std::logic_error(std::string("schedule runs ") + op_name(compute.kind) + " of " + of(compute) +
                           " without receiving its input");
  if (!it->second->done.load(std::memory_order_acquire)) return nullptr;
  check(*it->second);
  return &it->second->buffer;
}

void pipeline_port::release_input(const action& compute) {
  const auto it = recvs_.find(key_of(compute));
  if (it == recvs_.end()) return;
  trace(*it->second);
  recvs_.erase(it);
}

// A finished transfer as a span from its post to its completion, e.g. "send activation mb 3
// chunk 0" with its bytes, peer and tag (equal on both ends: the pair in two ranks' traces).
void pipeline_port::trace(const transfer& t) const {
  if (!trace_ || !trace_->active()) return;
  const bool send = t.what.kind == op::send_forward || t.what.kind == op::send_backward;
  const bool gradient = t.what.kind == op::send_backward || t.what.kind == op::recv_backward;
  const auto bytes = static_cast<std::int64_t>(t.buffer.nbytes());
  trace_->span(std::string(send ? "send " : "recv ") + (gradient ? "gradient" : "activation") + " mb " +
                   std::to_string(t.what.microbatch) + " chunk " + std::to_string(t.what.chunk),
               "pipeline", t.posted, t.completed,
               {{"microbatch", t.what.microbatch}, {"chunk", t.what.chunk}, {"bytes", bytes}, {"peer", t.peer},
                {"tag", static_cast<std::int64_t>(t.tag)}},
               send ? trace_track::send : trace_track::recv);
}

std::string pipeline_port::awaited(const action& compute) const {
  const bool forward = compute.kind == op::forward;
  const int producer = virtual_stage(compute.chunk) + (forward ? -1 : 1);
  return std::string(forward ? "recv_forward" : "recv_backward") + " mb " + std::to_string(compute.microbatch) +
         " chunk " + std::to_string(compute.chunk) + " from rank " + std::to_string(peer_of(producer)) +
         " (virtual stage " + std::to_string(producer) + ")";
}

std::optional<std::string> pipeline_port::unfinished_send() {
  for (auto& t : sends_) {
    if (!t->done.load(std::memory_order_acquire))
      return "send of mb " + std::to_string(t->what.microbatch) + " chunk " + std::to_string(t->what.chunk) +
             " to rank " + std::to_string(t->peer);
    check(*t);
  }
  for (const auto& t : sends_) trace(*t);
  sends_.clear();
  if (!recvs_.empty() || !outputs_.empty() || !local_arrivals_.empty())
    throw std::logic_error("the schedule finished with " + std::to_string(recvs_.size()) + " receives and " +
                           std::to_string(outputs_.size() + local_arrivals_.size()) + " sends unmatched");
  return std::nullopt;
}

}  // namespace mactor::training
