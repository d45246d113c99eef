// The pseudo-device's memory (tests/kernels/pseudo_device.hpp): a reserved host range, readable
// only while an open_window lives, and the blocks handed out from it.
#pragma once

#include <cstddef>

namespace mactor::test::pseudo {

/// A block of at least `bytes` (256-byte aligned); throws std::bad_alloc past the arena.
void* allocate(std::size_t bytes);
/// Gives back a block of allocate().
void release(void* block) noexcept;
/// True when [data, data + bytes) lies inside one live block.
bool holds(const void* data, std::size_t bytes);
/// Bytes in live blocks.
std::size_t live_bytes();
/// Registers the arena as device_type::cuda's memory and installs the SIGSEGV report (once).
void install_memory();

/// The arena is readable and writable while one of these lives (they nest, on any threads).
class open_window {
 public:
  open_window();
  ~open_window();
  open_window(const open_window&) = delete;
  open_window& operator=(const open_window&) = delete;
};

}  // namespace mactor::test::pseudo
