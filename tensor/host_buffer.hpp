// Host memory that the data plane moves: gradients, parameters, pipeline activations and the
// collectives' scratch. Buffers of 1 MiB and more are 2 MiB-aligned, rounded up to whole 2 MiB
// pages and advised for transparent huge pages (MADV_HUGEPAGE), because UCX's shared-memory path (CMA, process_vm_readv) copies
// them 2-3x faster than 4 KiB pages (bench_comm: ~4 -> ~12-18 GiB/s at 4-16 MiB on this machine).
// The lowest layer (tensor/), so model/, comm/ and checkpoint/ all keep their buffers in it.
//   MACTOR_HUGE_PAGES=off   plain allocations (for comparisons)
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace mactor::tensor {

inline constexpr std::size_t huge_page_size = std::size_t{2} << 20;
/// Smaller buffers keep 4 KiB pages (rounding them up would waste more than they gain).
inline constexpr std::size_t huge_page_threshold = huge_page_size / 2;

/// Whether large data-plane buffers get huge pages (MACTOR_HUGE_PAGES, read once).
inline bool huge_pages_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("MACTOR_HUGE_PAGES");
    return !(v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0 || std::strcmp(v, "no") == 0));
  }();
  return enabled;
}

template <class T>
struct huge_page_allocator {
  using value_type = T;
  huge_page_allocator() noexcept = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_page_threshold || !huge_pages_enabled()) return static_cast<T*>(::operator new(bytes));
    const std::size_t rounded = (bytes + huge_page_size - 1) / huge_page_size * huge_page_size;
    void* p = std::aligned_alloc(huge_page_size, rounded);
    if (!p) throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);  // a kernel without THP ignores the advice
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < huge_page_threshold || !huge_pages_enabled())
      ::operator delete(p);
    else
      std::free(p);
  }
  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }
};

/// A vector whose large storage is in huge pages.
template <class T>
using host_vector = std::vector<T, huge_page_allocator<T>>;

}  // namespace mactor::tensor
