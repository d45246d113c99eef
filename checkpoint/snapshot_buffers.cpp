// Recycled snapshot buffers (see snapshot_buffers.hpp).
#include "checkpoint/snapshot_buffers.hpp"

#include <algorithm>

namespace mactor::checkpoint {

std::vector<float> snapshot_buffers::copy(const float* src, std::size_t n) {
  std::vector<float> out;
  {
    std::lock_guard lock(mutex_);
    if (const auto it = free_.find(n); it != free_.end()) {
      out = std::move(it->second);
      free_.erase(it);
      free_bytes_ -= static_cast<std::int64_t>(n * sizeof(float));
      ++reused_;
    } else {
      ++allocated_;
    }
  }
  if (out.size() == n) {
    std::copy_n(src, n, out.data());
  } else {
    out.assign(src, src + n);
  }
  return out;
}

void snapshot_buffers::give_back(rank_state& state) {
  std::unordered_multimap<std::size_t, std::vector<float>> stale;
  std::lock_guard lock(mutex_);
  stale.swap(free_);  // freed when this returns, after the lock
  free_bytes_ = 0;
  for (auto& p : state.pieces) {
    if (p.data.empty()) continue;
    const std::size_t n = p.data.size();
    free_bytes_ += static_cast<std::int64_t>(n * sizeof(float));
    free_.emplace(n, std::move(p.data));
    p.data = {};
  }
}

std::int64_t snapshot_buffers::reused() const {
  std::lock_guard lock(mutex_);
  return reused_;
}

std::int64_t snapshot_buffers::allocated() const {
  std::lock_guard lock(mutex_);
  return allocated_;
}

std::int64_t snapshot_buffers::free_bytes() const {
  std::lock_guard lock(mutex_);
  return free_bytes_;
}

}  // namespace mactor::checkpoint
