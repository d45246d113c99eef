// Client side of the rendezvous store; collectives are keys named after the rank that set them,
// so a timeout can say exactly which ranks never arrived.
#include "comm/rendezvous_client.hpp"

#include <unistd.h>

#include <algorithm>

namespace mactor::comm {

rendezvous_client::rendezvous_client(host_port addr, std::chrono::milliseconds connect_timeout)
    : addr_(std::move(addr)), fd_(connect_with_retry(addr_, connect_timeout)) {}

rendezvous_client::~rendezvous_client() {
  if (fd_ >= 0) ::close(fd_);
}

rendezvous_client::rendezvous_client(rendezvous_client&& other) noexcept
    : addr_(std::move(other.addr_)), fd_(other.fd_), generation_(std::move(other.generation_)) {
  other.fd_ = -1;
}

std::string rendezvous_client::call(const std::string& request) {
  send_frame(fd_, request);
  std::string reply;
  if (!recv_frame(fd_, reply))
    throw rendezvous_error("lost the connection to the rendezvous store at " + addr_.str() +
                           "; the process hosting it (mactor or rank 0) has exited");
  return reply;
}

void rendezvous_client::set(const std::string& key, const std::string& value) {
  wire_writer w;
  w.u8(static_cast<uint8_t>(rdzv_op::set));
  w.bytes(key);
  w.bytes(value);
  call(w.data());
}

std::string rendezvous_client::get(const std::string& key, std::chrono::milliseconds timeout) {
  wire_writer w;
  w.u8(static_cast<uint8_t>(rdzv_op::get));
  w.bytes(key);
  w.u64(static_cast<uint64_t>(std::max<int64_t>(0, timeout.count())));
  std::string reply = call(w.data());
  wire_reader r(reply);
  if (static_cast<rdzv_status>(r.u8()) != rdzv_status::ok)
    throw rendezvous_error("rendezvous key '" + key + "' was not set within " +
                           std::to_string(timeout.count()) + " ms at " + addr_.str() +
                           "; the rank that should set it may have died or not started");
  return r.bytes();
}

std::vector<std::string> rendezvous_client::wait(const std::vector<std::string>& keys,
                                                 std::chrono::milliseconds timeout) {
  wire_writer w;
  w.u8(static_cast<uint8_t>(rdzv_op::wait));
  w.u64(keys.size());
  for (auto& k : keys) w.bytes(k);
  w.u64(static_cast<uint64_t>(std::max<int64_t>(0, timeout.count())));
  std::string reply = call(w.data());
  wire_reader r(reply);
  r.u8();
  std::vector<std::string> missing(r.u64());
  for (auto& m : missing) m = r.bytes();
  return missing;
}

int64_t rendezvous_client::add(const std::string& key, int64_t delta) {
  wire_writer w;
  w.u8(static_cast<uint8_t>(rdzv_op::add));
  w.bytes(key);
  w.u64(static_cast<uint64_t>(delta));
  std::string reply = call(w.data());
  wire_reader r(reply);
  if (static_cast<rdzv_status>(r.u8()) != rdzv_status::ok)
    throw rendezvous_error("rendezvous key '" + key + "' holds bytes that are not a counter; "
                           "use a separate key for add()");
  return static_cast<int64_t>(r.u64());
}

std::vector<std::string> rendezvous_client::rank_keys(const std::string& name, int world_size) {
  // Every rank uses a name in the same order, so the per-name count agrees across ranks.
  std::string prefix = "mactor/" + name + "#" + std::to_string(generation_[name]++) + "/";
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(prefix + std::to_string(r));
  return keys;
}

void rendezvous_client::wait_for_ranks(const std::string& what, const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout) {
  auto missing = wait(keys, timeout);
  if (missing.empty()) return;
  std::string ranks;
  for (auto& k : missing) {
    if (!ranks.empty()) ranks += ", ";
    ranks += k.substr(k.rfind('/') + 1);
  }
  throw rendezvous_error(what + ": rank" + (missing.size() > 1 ? "s " : " ") + ranks +
                         " never arrived within " +
                         std::to_string(timeout.count()) + " ms (" + std::to_string(missing.size()) +
                         " of " + std::to_string(keys.size()) + " missing, store " + addr_.str() +
                         "); check that rank's log: it crashed, hung, or was never started");
}

void rendezvous_client::barrier(const std::string& name, int rank, int world_size,
                                std::chrono::milliseconds timeout) {
  auto keys = rank_keys("barrier/" + name, world_size);
  set(keys.at(rank), "");
  wait_for_ranks("barrier '" + name + "'", keys, timeout);
}

std::vector<std::string> rendezvous_client::all_gather(const std::string& name, int rank,
                                                       int world_size, const std::string& value,
                                                       std::chrono::milliseconds timeout) {
  auto keys = rank_keys("gather/" + name, world_size);
  set(keys.at(rank), value);
  wait_for_ranks("all_gather '" + name + "'", keys, timeout);
  std::vector<std::string> values;
  for (auto& k : keys) values.push_back(get(k, timeout));
  return values;
}

}  // namespace mactor::comm
