// Per-thread partial sums for parameter gradients reduced over rows (norm weights, biases):
// each OpenMP thread accumulates into its own row of scratch, then the rows are added once.
#pragma once
#include <omp.h>

#include <vector>

namespace mactor::kernels::detail {

template <typename T>
class row_reduction {
 public:
  row_reduction(int threads, int width) : width_(width), partial_(std::size_t(threads) * width) {}
  T* slot(int thread) { return partial_.data() + std::size_t(thread) * width_; }
  /// out[width] += sum of every thread's slot.
  void add_to(T* out, int threads) const {
    for (int t = 0; t < threads; ++t)
      for (int j = 0; j < width_; ++j) out[j] += partial_[std::size_t(t) * width_ + j];
  }

 private:
  int width_;
  std::vector<T> partial_;
};

}  // namespace mactor::kernels::detail
