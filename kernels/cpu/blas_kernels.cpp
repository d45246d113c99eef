// OpenBLAS's kernel pick against the CPU's features (see the header).
#include "kernels/blas_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace mactor::kernels {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// OpenBLAS's x86 cores older than AVX2: the ones a mis-detected modern CPU ends up with.
bool before_avx2(const std::string& core) {
  for (const char* old : {"prescott", "core2", "penryn", "dunnington", "nehalem", "sandybridge", "atom", "katmai",
                          "coppermine", "northwood", "banias", "opteron", "barcelona", "bobcat", "bulldozer",
                          "piledriver", "steamroller", "excavator", "unknown"})
    if (core == old) return true;
  return false;
}

}  // namespace

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

std::optional<std::string> better_blas_coretype() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE")) return std::nullopt;
  const std::string core = lower(blas_core_name());
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512cd");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512 && (before_avx2(core) || core == "haswell" || core == "zen")) return "SKYLAKEX";
  if (avx2 && before_avx2(core)) return "HASWELL";
#endif
  return std::nullopt;
}

}  // namespace mactor::kernels
