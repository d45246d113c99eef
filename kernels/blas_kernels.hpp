// Which GEMM kernels OpenBLAS runs. OpenBLAS (a DYNAMIC_ARCH build, as Debian's) picks them by the
// CPU's family and model number when it loads, and on a CPU it does not know (virtual machines
// often hide the model: "Intel Xeon Processor") falls back to its oldest, Prescott's SSE3 kernels,
// although the CPU runs AVX-512. Here that made a training step 2.5-3x slower (README, "Notes for
// users"). OPENBLAS_CORETYPE overrides the pick, but OpenBLAS reads it only when it loads, so a
// program sets it and starts itself again (examples/pretrain_main.cpp).
#pragma once

#include <optional>
#include <string>

namespace mactor::kernels {

/// The core OpenBLAS picked (openblas_get_corename: "Prescott", "SkylakeX", "Haswell", ...).
std::string blas_core_name();

/// The OPENBLAS_CORETYPE this CPU's features call for (SkylakeX with AVX-512, Haswell with AVX2
/// and FMA) when OpenBLAS picked an older core than that and nobody set OPENBLAS_CORETYPE;
/// nullopt otherwise (the user's choice always stands).
std::optional<std::string> better_blas_coretype();

}  // namespace mactor::kernels
