// transport_communicator::start_exchange: a send and a receive posted on the transport and
// moved along by the caller's test() calls between pieces of its work, with no thread of its own.
#include <future>

#include "comm/collectives.hpp"

namespace mactor::comm {

class transport_communicator::exchange_in_flight final : public pending_exchange {
 public:
  exchange_in_flight(transport_communicator& c, std::span<const std::byte> out, int to, std::span<std::byte> in,
                     int from)
      : c_(c), to_(to), from_(from), expected_(in.size()) {
    const std::uint64_t tag = c.next_tag();
    received_ = c.transport_.recv_future(c.members_[from], tag, in.data(), in.size());
    sent_ = c.transport_.send_future(c.members_[to], tag, out.data(), out.size());
  }
  ~exchange_in_flight() override {
    if (waited_) return;
    // Unwinding past an exchange still in flight: its buffers must outlive it, so wait a
    // bounded time; the failure that is unwinding is the one to report.
    try {
      for (auto* f : {&sent_, &received_})
        if (f->valid()) c_.transport_.wait_for(*f, c_.timeout_);
    } catch (...) {
    }
  }

  bool test() override {
    c_.transport_.progress();
    return done(sent_) && done(received_);
  }

  void wait() override {
    waited_ = true;
    c_.wait(sent_, to_, "sending its half of an exchange");
    if (!c_.transport_.wait_for(received_, c_.timeout_)) c_.fail_timeout(from_, "receiving its half of an exchange");
    check_received(received_.get(), expected_);
  }

 private:
  static bool done(std::future<status>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  transport_communicator& c_;
  int to_, from_;
  std::size_t expected_;
  std::future<status> sent_, received_;
  bool waited_ = false;
};

std::unique_ptr<pending_exchange> transport_communicator::start_exchange(std::span<const std::byte> out, int to,
                                                                         std::span<std::byte> in, int from) {
  return std::make_unique<exchange_in_flight>(*this, out, to, in, from);
}

}  // namespace mactor::comm
