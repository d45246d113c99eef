// The transport's non-virtual helpers: owned sends and future-returning forms.
#include "comm/transport.hpp"

namespace mactor::comm {

void transport::send_owned(int peer, std::uint64_t tag, std::vector<std::byte> bytes,
                           completion done) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  const void* data = owned->data();
  const std::size_t size = owned->size();
  send(peer, tag, data, size, [owned, done = std::move(done)](const status& s) mutable {
    owned.reset();
    if (done) done(s);
  });
}

std::future<status> transport::send_future(int peer, std::uint64_t tag, const void* data,
                                           std::size_t size) {
  auto p = std::make_shared<std::promise<status>>();
  auto f = p->get_future();
  send(peer, tag, data, size, [p](const status& s) { p->set_value(s); });
  return f;
}

std::future<status> transport::recv_future(int peer, std::uint64_t tag, void* data,
                                           std::size_t capacity) {
  auto p = std::make_shared<std::promise<status>>();
  auto f = p->get_future();
  recv(peer, tag, data, capacity, [p](const status& s) { p->set_value(s); });
  return f;
}

bool transport::wait_for(std::future<status>& f, std::chrono::milliseconds timeout) {
  return f.wait_for(timeout) == std::future_status::ready;
}

void transport::wait_ok(std::future<status>& f) {
  wait_for(f, std::chrono::hours(24 * 365));
  comm::wait_ok(f);
}

void wait_ok(std::future<status>& f) {
  const status s = f.get();
  if (!s.ok) throw comm_error(s.peer, s.message);
}

}  // namespace mactor::comm
