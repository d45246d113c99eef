// The pseudo-device's arena: one mmap'd range, PROT_NONE outside its windows.
#include "tests/kernels/pseudo_device_arena.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "tensor/device_memory.hpp"

namespace mactor::test::pseudo {

namespace {

constexpr std::size_t reserved = std::size_t(1) << 32;  // address space only (MAP_NORESERVE)
constexpr std::size_t alignment = 256;

struct arena {
  std::byte* base = nullptr;
  std::size_t used = 0;                        // bump pointer: every block lies below it
  std::map<std::uintptr_t, std::size_t> live;  // block start -> its rounded size
  std::multimap<std::size_t, std::byte*> free;  // rounded size -> a given-back block
  std::size_t live_bytes = 0, peak_live_bytes = 0;
  int depth = 0;                               // open windows
  std::recursive_mutex mutex;
};

arena& the_arena() {
  static arena* a = [] {
    auto* made = new arena;  // lives until exit: device tensors may outlive any test object
    void* p = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    made->base = static_cast<std::byte*>(p);
    return made;
  }();
  return *a;
}

std::size_t committed(const arena& a) {
  const auto page = std::size_t(sysconf(_SC_PAGESIZE));
  return (a.used + page - 1) / page * page;
}

void protect(arena& a, int mode) {
  if (a.used && mprotect(a.base, committed(a), mode) != 0) std::perror("pseudo-device: mprotect");
}

struct sigaction previous_segv;

// A fault in the arena is the host touching device memory outside a kernel: say so, then fault
// again under the handler that was there before (Catch's, which names the test).
void on_segv(int sig, siginfo_t* info, void* context) {
  const auto& a = the_arena();
  const auto* at = static_cast<const std::byte*>(info->si_addr);
  if (at >= a.base && at < a.base + reserved) {
    char message[256];
    const int n = std::snprintf(message, sizeof message,
                                "\npseudo-device: the host touched device memory outside a kernel, at arena "
                                "offset %zu: a host read or write the device port missed (run under gdb to "
                                "see where)\n",
                                std::size_t(at - a.base));
    if (n > 0) (void)!write(2, message, std::size_t(n));
  }
  sigaction(SIGSEGV, &previous_segv, nullptr);
  (void)sig, (void)context;
}

void memory_fill_zero(int, void* data, std::size_t bytes) {
  open_window w;
  std::memset(data, 0, bytes);
}
void memory_copy(int, void* dst, const void* src, std::size_t bytes) {
  open_window w;
  std::memmove(dst, src, bytes);
}
void memory_upload(int, void* dst, const void* host_src, std::size_t bytes) {
  if (holds(host_src, 1)) throw std::logic_error("pseudo-device: an upload from device memory");
  open_window w;
  std::memcpy(dst, host_src, bytes);
}
void memory_download(int, void* host_dst, const void* src, std::size_t bytes) {
  if (holds(host_dst, 1)) throw std::logic_error("pseudo-device: a download into device memory");
  open_window w;
  std::memcpy(host_dst, src, bytes);
}
void* memory_allocate(int, std::size_t bytes) { return allocate(bytes); }
// Blocks handed out, as a caching allocator counts them; the bump pointer is what it reserved.
tensor::allocator_stats memory_stats(int) {
  auto& a = the_arena();
  std::lock_guard lock(a.mutex);
  tensor::allocator_stats s;
  s.allocated_bytes = a.live_bytes, s.peak_allocated_bytes = a.peak_live_bytes;
  s.reserved_bytes = s.peak_reserved_bytes = a.used;
  return s;
}
void memory_release(int, void* data) noexcept { release(data); }

}  // namespace

void* allocate(std::size_t bytes) {
  auto& a = the_arena();
  std::lock_guard lock(a.mutex);
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  std::byte* block;
  if (auto it = a.free.find(size); it != a.free.end()) {
    block = it->second;
    a.free.erase(it);
  } else {
    if (a.used + size > reserved) throw std::bad_alloc();
    block = a.base + a.used;
    a.used += size;
    if (a.depth > 0) protect(a, PROT_READ | PROT_WRITE);
  }
  a.live.emplace(std::uintptr_t(block), size);
  a.live_bytes += size;
  a.peak_live_bytes = std::max(a.peak_live_bytes, a.live_bytes);
  return block;
}

void release(void* block) noexcept {
  auto& a = the_arena();
  std::lock_guard lock(a.mutex);
  auto it = a.live.find(std::uintptr_t(block));
  if (it == a.live.end()) {
    std::fprintf(stderr, "pseudo-device: release of %p, which is not a live block\n", block);
    std::abort();
  }
  a.free.emplace(it->second, static_cast<std::byte*>(block));
  a.live_bytes -= it->second;
  a.live.erase(it);
}

bool holds(const void* data, std::size_t bytes) {
  auto& a = the_arena();
  std::lock_guard lock(a.mutex);
  const auto at = std::uintptr_t(data);
  auto it = a.live.upper_bound(at);
  if (it == a.live.begin()) return false;
  --it;
  return at >= it->first && at + bytes <= it->first + it->second;
}

std::size_t live_bytes() {
  auto& a = the_arena();
  std::lock_guard lock(a.mutex);
  std::size_t sum = 0;
  for (const auto& [at, size] : a.live) sum += size;
  return sum;
}

void install_memory() {
  static const bool installed = [] {
    the_arena();
    tensor::register_device_memory(tensor::device_type::cuda,
                                   {memory_allocate, memory_release, memory_fill_zero, memory_copy,
                                    memory_upload, memory_download, memory_stats});
    return true;
  }();
  (void)installed;
  // Every time: Catch installs its own handler for each test case.
  struct sigaction report {};
  report.sa_sigaction = on_segv;
  report.sa_flags = SA_SIGINFO;
  sigemptyset(&report.sa_mask);
  sigaction(SIGSEGV, &report, &previous_segv);
}

open_window::open_window() {
  auto& a = the_arena();
  a.mutex.lock();
  if (a.depth++ == 0) protect(a, PROT_READ | PROT_WRITE);
}

open_window::~open_window() {
  auto& a = the_arena();
  if (--a.depth == 0) protect(a, PROT_NONE);
  a.mutex.unlock();
}

}  // namespace mactor::test::pseudo
