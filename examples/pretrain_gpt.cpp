// pretrain_gpt: Megatron-LM's pretrain_gpt.py command line, run by mactor.
#include "examples/pretrain_main.hpp"

int main(int argc, char** argv) { return pretrain_main(argc, argv, "pretrain_gpt"); }
