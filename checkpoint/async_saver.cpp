// async_saver: one std::thread per save, joined by the next save or by wait().
#include "checkpoint/async_saver.hpp"

namespace mactor::checkpoint {

async_saver::~async_saver() {
  if (worker_.joinable()) worker_.join();
}

void async_saver::save_async(std::string save_dir, std::int64_t iteration, int rank,
                             int world_size, rank_state state, save_options options) {
  wait();
  worker_ = std::thread([this, dir = std::move(save_dir), iteration, rank, world_size,
                         st = std::move(state), opts = std::move(options)]() mutable {
    try {
      save(dir, iteration, rank, world_size, std::move(st), opts);
    } catch (...) {
      error_ = std::current_exception();  // read only after join(), which orders the write
    }
  });
}

void async_saver::wait() {
  if (worker_.joinable()) worker_.join();
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace mactor::checkpoint
