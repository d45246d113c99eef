// Reading a rank's memory: the ledger for allocated bytes, /proc and getrusage for resident ones.
#include "training/memory_report.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "config/python_text.hpp"
#include "tensor/device_memory.hpp"
#include "tensor/memory_ledger.hpp"

namespace mactor::training {

rank_memory read_rank_memory(int rank, bool data_parallel_first, tensor::device where) {
  rank_memory m;
  m.rank = rank;
  m.data_parallel_first = data_parallel_first;
  if (where != tensor::cpu) {
    if (const auto& memory = tensor::memory_of(where); memory.stats) {
      const auto s = memory.stats(where.index);
      m.allocated_bytes = double(s.allocated_bytes), m.max_allocated_bytes = double(s.peak_allocated_bytes);
      m.reserved_bytes = double(s.reserved_bytes), m.max_reserved_bytes = double(s.peak_reserved_bytes);
      return m;
    }
  }
  const auto total = tensor::memory_ledger::host().total();
  m.allocated_bytes = static_cast<double>(total.current);
  m.max_allocated_bytes = static_cast<double>(total.peak);
  long pages_total = 0, pages_resident = 0;
  if (std::ifstream statm("/proc/self/statm"); statm >> pages_total >> pages_resident)
    m.reserved_bytes = static_cast<double>(pages_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) m.max_reserved_bytes = static_cast<double>(usage.ru_maxrss) * 1024.0;
  m.max_reserved_bytes = std::max(m.max_reserved_bytes, m.reserved_bytes);  // the kernel updates maxrss lazily
  return m;
}

std::string memory_line(const rank_memory& m, long long iteration) {
  constexpr double mega_bytes = 1024.0 * 1024.0;
  return "[Rank " + std::to_string(m.rank) + "] (after " + std::to_string(iteration) + " iterations) memory (MB)" +
         " | allocated: " + config::python_float_repr(m.allocated_bytes / mega_bytes) +
         " | max allocated: " + config::python_float_repr(m.max_allocated_bytes / mega_bytes) +
         " | reserved: " + config::python_float_repr(m.reserved_bytes / mega_bytes) +
         " | max reserved: " + config::python_float_repr(m.max_reserved_bytes / mega_bytes);
}

}  // namespace mactor::training
