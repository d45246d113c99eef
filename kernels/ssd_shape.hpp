// The sizes of one Mamba-2 SSD scan (kernels/ssd_scan.hpp), apart so that the CUDA kernels take
// the same description without the tensor headers.
#pragma once
#include <cstdint>

namespace mactor::kernels {

/// Sizes of one scan. Head hd reads B and C of group hd / (heads / groups).
struct ssd_shape {
  int batch = 1;
  int seq = 1;       // l
  int heads = 1;     // h
  int head_dim = 1;  // p
  int groups = 1;    // g, divides heads
  int state = 1;     // n (d_state)
  int chunk = 64;    // chunk length; seq need not be a multiple of it
  int num_chunks() const { return (seq + chunk - 1) / chunk; }
  /// Elements of the saved chunk-entry states: [batch, heads, num_chunks, p, n].
  std::int64_t states_size() const {
    return std::int64_t(batch) * heads * num_chunks() * head_dim * state;
  }
};

}  // namespace mactor::kernels
