// The small hybrid Mamba model (pretrain_mamba, Megatron's mamba_stack_spec, pattern M*-M: Mamba,
// attention-only, MLP-only, Mamba) the launch tests train: six iterations with an evaluation at 3.
#pragma once
#include <string>

namespace mactor::test {

inline std::string hybrid_model_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec --hybrid-override-pattern M*-M "
         "--mamba-state-dim 8 --mamba-head-dim 8 --mamba-num-groups 2 --is-hybrid-model "
         "--position-embedding-type none --normalization RMSNorm --disable-bias-linear "
         "--untie-embeddings-and-output-weights --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 "
         "--global-batch-size 8 --train-iters 6 --lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 "
         "--clip-grad 1.0 --weight-decay 0.1 --init-method-std 0.1 --tokenizer-type NullTokenizer --vocab-size 8191 "
         "--hidden-dropout 0.1 --attention-dropout 0 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 99";
}

}  // namespace mactor::test
