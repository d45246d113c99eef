// An address_exchange over a shared directory: each rank writes rank_<r>.addr atomically and
// peers poll for it. For tests and single-host runs; the launcher's key-value store replaces it.
#pragma once

#include <filesystem>

#include "comm/transport.hpp"

namespace mactor::comm {

class file_address_exchange final : public address_exchange {
 public:
  /// `directory` must exist and be shared by every rank (a temp dir on one host).
  explicit file_address_exchange(std::filesystem::path directory);
  void publish(int rank, const std::vector<std::byte>& address) override;
  std::vector<std::byte> fetch(int rank, std::chrono::milliseconds timeout) override;

 private:
  std::filesystem::path file_of(int rank) const;
  std::filesystem::path directory_;
};

}  // namespace mactor::comm
