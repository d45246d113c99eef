#include "comm/watched_communicator.hpp"

#include <cstdio>

namespace mactor::comm {
namespace {

thread_local bool background_thread = false;

}  // namespace

void mark_background_thread() { background_thread = true; }
bool on_background_thread() { return background_thread; }

namespace {
thread_local const call_label* current_label = nullptr;
}  // namespace

call_label::call_label(std::string what, int peer) : outer_(current_label), what_(std::move(what)), peer_(peer) {
  current_label = this;
}

call_label::~call_label() { current_label = outer_; }

std::string format_size(std::size_t bytes) {
  char text[32];
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%zu B", bytes);
  else if (bytes < 1024 * 1024)
    std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Marks the communicator busy with one operation for as long as it lives.
class watched_communicator::scope {
 public:
  scope(watched_communicator& c, const char* op, std::size_t bytes, int peer = -1) : c_(c) {
    std::lock_guard lock(c_.mu_);
    c_.op_ = op;
    c_.bytes_ = bytes;
    c_.peer_ = peer;
    c_.since_ = clock::now();
    c_.background_ = background_thread;
    c_.label_ = current_label ? current_label->what_ : std::string();
    c_.label_peer_ = current_label ? current_label->peer_ : -1;
  }
  ~scope() {
    std::lock_guard lock(c_.mu_);
    c_.op_ = nullptr;
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

 private:
  watched_communicator& c_;
};

watched_communicator::watched_communicator(std::unique_ptr<communicator> inner, std::string name,
                                           std::vector<int> members, int me)
    : inner_(std::move(inner)), name_(std::move(name)), members_(std::move(members)) {
  std::vector<int> others;
  for (int m : members_)
    if (m != me) others.push_back(m);
  others_ = others.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < others.size(); ++i) others_ += (i ? ", " : "") + std::to_string(others[i]);
}

std::optional<watched_communicator::call> watched_communicator::current() const {
  std::lock_guard lock(mu_);
  if (!op_) return std::nullopt;
  const auto member = [&](int index) {
    return index >= 0 && index < static_cast<int>(members_.size()) ? "rank " + std::to_string(members_[index]) : others_;
  };
  if (!label_.empty()) {
    std::string what = label_;
    if (const auto at = what.find("{peer}"); at != std::string::npos) what.replace(at, 6, member(label_peer_));
    return call{what, since_, background_};
  }
  return call{name_ + " " + op_ + " of " + format_size(bytes_) + " with " + member(peer_), since_, background_};
}

void watched_communicator::all_reduce(std::span<float> data) {
  scope s(*this, "all-reduce", data.size_bytes());
  inner_->all_reduce(data);
}
void watched_communicator::all_reduce(std::span<double> data) {
  scope s(*this, "all-reduce", data.size_bytes());
  inner_->all_reduce(data);
}
void watched_communicator::reduce_scatter(std::span<const float> in, std::span<float> out) {
  scope s(*this, "reduce-scatter", in.size_bytes());
  inner_->reduce_scatter(in, out);
}
void watched_communicator::reduce_scatter(std::span<const double> in, std::span<double> out) {
  scope s(*this, "reduce-scatter", in.size_bytes());
  inner_->reduce_scatter(in, out);
}
void watched_communicator::all_gather_bytes(std::span<const std::byte> in, std::span<std::byte> out) {
  scope s(*this, "all-gather", out.size_bytes());
  inner_->all_gather_bytes(in, out);
}
void watched_communicator::broadcast_bytes(std::span<std::byte> data, int root) {
  scope s(*this, "broadcast", data.size_bytes());
  inner_->broadcast_bytes(data, root);
}
void watched_communicator::all_to_all_bytes(std::span<const std::byte> in, std::span<std::byte> out) {
  scope s(*this, "all-to-all", in.size_bytes());
  inner_->all_to_all_bytes(in, out);
}
void watched_communicator::all_to_all_v_bytes(std::span<const std::byte> in, std::span<const std::size_t> send_counts,
                                              std::span<std::byte> out, std::span<const std::size_t> recv_counts) {
  std::size_t bytes = 0;
  for (auto c : send_counts) bytes += c;
  scope s(*this, "all-to-all-v", bytes);
  inner_->all_to_all_v_bytes(in, send_counts, out, recv_counts);
}
void watched_communicator::barrier() {
  scope s(*this, "barrier", 0);
  inner_->barrier();
}
void watched_communicator::send_bytes(std::span<const std::byte> data, int peer) {
  scope s(*this, "send", data.size_bytes(), peer);
  inner_->send_bytes(data, peer);
}
void watched_communicator::recv_bytes(std::span<std::byte> data, int peer) {
  scope s(*this, "receive", data.size_bytes(), peer);
  inner_->recv_bytes(data, peer);
}

class watched_communicator::watched_exchange final : public pending_exchange {
 public:
  watched_exchange(watched_communicator& c, std::unique_ptr<pending_exchange> inner, std::size_t bytes, int from)
      : c_(c), inner_(std::move(inner)), bytes_(bytes), from_(from) {}
  bool test() override { return inner_->test(); }
  void wait() override {
    scope s(c_, "exchange", bytes_, from_);
    inner_->wait();
  }

 private:
  watched_communicator& c_;
  std::unique_ptr<pending_exchange> inner_;
  std::size_t bytes_;
  int from_;
};

std::unique_ptr<pending_exchange> watched_communicator::start_exchange(std::span<const std::byte> out, int to,
                                                                       std::span<std::byte> in, int from) {
  return std::make_unique<watched_exchange>(*this, inner_->start_exchange(out, to, in, from), in.size(), from);
}

}  // namespace mactor::comm
