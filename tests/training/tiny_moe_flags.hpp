// The tiny Mixtral-style MoE the MoE layout tests train: 4 layers (the last 3 MoE), 8 experts of
// ffn 32, top-2, SwiGLU, aux and z losses, the alltoall dispatcher, 8 iterations of 16 samples
// with an evaluation every 4.
#pragma once
#include <string>

namespace mactor::test {

inline std::string tiny_moe_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 8 --lr-decay-iters 8 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-interval 4 "
         "--eval-iters 1 --seed 9 --hidden-dropout 0 --attention-dropout 0 --disable-bias-linear --swiglu "
         "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 32 --moe-layer-freq '([0]*1+[1]*3)' "
         "--moe-aux-loss-coeff 0.1 --moe-z-loss-coeff 0.01 --moe-token-dispatcher-type alltoall";
}

}  // namespace mactor::test
