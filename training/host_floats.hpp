// Host access to fp32 arrays that may be in a device's memory (the main parameters and the
// optimizer's slices of a model on a GPU), for the code that moves a rank's state between files
// and the model: a checkpoint reads them through a host copy and writes them by an upload.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "tensor/transfer.hpp"

namespace mactor::training {

/// Elements [begin, end) of the float array `local` in `where`'s memory, readable on the host
/// through local(), indexed as `local` is: `local` itself on the host, else a host copy of the range.
class host_floats {
 public:
  host_floats(tensor::device where, const float* local, std::size_t begin, std::size_t end) {
    if (where == tensor::cpu) {
      local_ = local;
      return;
    }
    copy_ = tensor::host_copy<float>({local + begin, {static_cast<std::int64_t>(end - begin)}, tensor::dtype::float32, where});
    local_ = copy_.data() - begin;
  }
  const float* local() const { return local_; }

 private:
  std::vector<float> copy_;
  const float* local_ = nullptr;
};

/// Copies host `values` into the float array at `dst` in `where`'s memory.
inline void write_floats(tensor::device where, float* dst, std::span<const float> values) {
  tensor::copy_between({dst, {static_cast<std::int64_t>(values.size())}, tensor::dtype::float32, where},
                       tensor::view_of(values));
}

}  // namespace mactor::training
