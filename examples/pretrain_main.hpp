// The one main behind pretrain_gpt and pretrain_mamba (examples/pretrain_main.cpp).
#pragma once

/// Parses Megatron's flags as `prog` ("pretrain_gpt" builds GPTModel, "pretrain_mamba"
/// MambaModel from --spec ... mamba_stack_spec), then trains; returns the exit status.
int pretrain_main(int argc, char** argv, const char* prog);
