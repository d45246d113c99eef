// pretrain_gpt (or, built as pretrain_mamba_on_pseudo_device, pretrain_mamba) with its model on
// the pseudo-device (tests/kernels/pseudo_device.hpp): the whole training path (the stage engine,
// its optimizer, its logging) runs with the model's tensors in memory the host cannot touch
// outside a kernel, so CI finds the engine's host accesses without a GPU. MACTOR_DEVICE=cuda
// points the engine at it (training/compute_device.hpp).
#include <cstdlib>

#include "examples/pretrain_main.hpp"
#include "tests/kernels/pseudo_device.hpp"

int main(int argc, char** argv) {
  setenv("MACTOR_DEVICE", "cuda", 1);
  const mactor::test::pseudo_device device;
  return pretrain_main(argc, argv, MACTOR_PSEUDO_PROGRAM);
}
