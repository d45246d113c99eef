// The in-process transport: ranks are threads of one process and messages are memcpy's.
// Used by tests and single-process runs; it follows the same matching rules as UCX.
#pragma once

#include <memory>

#include "comm/transport.hpp"

namespace mactor::comm {

/// The shared medium of `world_size` in-process ranks. Create one, then `connect(r)` once per
/// rank (each from the thread that plays that rank). The fabric must outlive its transports.
class local_fabric {
 public:
  explicit local_fabric(int world_size);
  ~local_fabric();
  local_fabric(const local_fabric&) = delete;
  local_fabric& operator=(const local_fabric&) = delete;

  std::unique_ptr<transport> connect(int rank);
  /// Simulates the death of `rank`: its pending operations and every later one that involves
  /// it complete with an error naming it.
  void fail_rank(int rank);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace mactor::comm
