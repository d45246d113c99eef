// Addresses travel through the store as raw byte strings under one key per rank.
#include "comm/store_address_exchange.hpp"

#include <cstring>

namespace mactor::comm {

store_address_exchange::store_address_exchange(rendezvous_client& client, std::string prefix)
    : client_(client), prefix_(std::move(prefix)) {}

void store_address_exchange::publish(int rank, const std::vector<std::byte>& address) {
  client_.set(prefix_ + std::to_string(rank),
              std::string(reinterpret_cast<const char*>(address.data()), address.size()));
}

std::vector<std::byte> store_address_exchange::fetch(int rank, std::chrono::milliseconds timeout) {
  std::string value;
  try {
    value = client_.get(prefix_ + std::to_string(rank), timeout);
  } catch (const std::exception& e) {
    throw comm_error(rank, "rank " + std::to_string(rank) + " did not publish its UCX address (" +
                               prefix_ + std::to_string(rank) + ") within " +
                               std::to_string(timeout.count()) + " ms: " + e.what());
  }
  std::vector<std::byte> out(value.size());
  std::memcpy(out.data(), value.data(), value.size());
  return out;
}

}  // namespace mactor::comm
