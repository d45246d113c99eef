// pretrain_mamba: Megatron-LM's pretrain_mamba.py command line (a hybrid Mamba model: --spec
// megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec), run by mactor.
#include "examples/pretrain_main.hpp"

int main(int argc, char** argv) { return pretrain_main(argc, argv, "pretrain_mamba"); }
