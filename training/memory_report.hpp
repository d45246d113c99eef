// One rank's memory as Megatron's report_memory and --log-memory-to-tensorboard show it, read on
// the CPU: "allocated" is what the memory ledger holds (every tensor's bytes, and the kernels'
// staging scratch) plus the optimizer's state (kept in plain vectors), "reserved" the process's
// resident set (what the allocator and everything else took from the system), each with its
// peak. With the model on a GPU, the device's caching allocator's counts, as torch.cuda's.
#pragma once

#include <string>
#include <vector>

#include "tensor/dtype.hpp"

namespace mactor::training {

struct rank_memory {
  int rank = 0;
  bool data_parallel_first = true;  ///< Megatron prints the ranks of data-parallel rank 0
  double allocated_bytes = 0, max_allocated_bytes = 0, reserved_bytes = 0, max_reserved_bytes = 0;
};

/// This process's memory now: the ledger's counts (tensors and the optimizer's state) and the
/// resident set; for a model on a device (`where`), the device allocator's allocated and
/// reserved bytes and their peaks, as Megatron reads torch.cuda's.
rank_memory read_rank_memory(int rank, bool data_parallel_first, tensor::device where = tensor::cpu);

/// Megatron's report_memory line: "[Rank R] (after N iterations) memory (MB) | allocated: ... |
/// max allocated: ... | reserved: ... | max reserved: ..." (numbers as Python prints floats).
std::string memory_line(const rank_memory& m, long long iteration);

}  // namespace mactor::training
