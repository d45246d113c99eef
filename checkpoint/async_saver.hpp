// --async-save: the caller hands over a snapshot and goes on; one background thread writes it.
// A new save first waits for the previous one, so at most one save per rank is in flight.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <thread>

#include "checkpoint/save.hpp"

namespace mactor::checkpoint {

class async_saver {
 public:
  async_saver() = default;
  ~async_saver();  // waits for the save in flight; an error it raised is dropped (call wait())
  async_saver(const async_saver&) = delete;
  async_saver& operator=(const async_saver&) = delete;

  /// Waits for the previous save (rethrowing its error), then starts saving `state` (already a
  /// snapshot: the caller may change its model at once) on a background thread and returns.
  void save_async(std::string save_dir, std::int64_t iteration, int rank, int world_size,
                  rank_state state, save_options options = {});
  /// Blocks until the save in flight (if any) has finished; rethrows its checkpoint_error.
  void wait();
  /// True while a save started by save_async has not been waited for.
  bool pending() const { return worker_.joinable(); }

 private:
  std::thread worker_;
  std::exception_ptr error_;
};

}  // namespace mactor::checkpoint
