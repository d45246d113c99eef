// Talks to a running job's inspection endpoint: fetches snapshots and posts swap requests.
// `mactor inspect` and `mactor swap` are built on it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "inspector/job_snapshot.hpp"
#include "inspector/server.hpp"

namespace mactor::inspector {

/// Why a request did not get an answer it could use.
struct client_error : std::runtime_error {
  enum class reason { unreachable, forbidden, bad_answer };
  client_error(reason why, std::string message) : std::runtime_error(std::move(message)), why(why) {}
  reason why;
};

class client {
 public:
  /// address: "HOST:PORT" as the job printed it (an "http://" prefix is accepted). Throws
  /// std::invalid_argument naming the address when it has no port.
  client(std::string address, std::string token, double timeout_s = 5);

  /// GET /api/snapshot. Throws client_error.
  job_snapshot snapshot() const;

  /// POST /api/swap/<target> with the flags. A refusal comes back as {ok=false, message}; an
  /// unreachable job or a wrong token throws client_error.
  swap_result swap(const std::string& target, const std::vector<std::string>& flags) const;

  const std::string& address() const { return address_; }

 private:
  std::string address_, host_, token_;
  int port_ = 0;
  double timeout_s_;
};

}  // namespace mactor::inspector
