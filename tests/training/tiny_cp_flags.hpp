// The tiny GQA/RoPE GPT the context-parallel layout tests train: 4 layers, 4 heads in 2 query
// groups, sequence 32, dropout 0.1, 6 iterations of 8 samples with an evaluation every 3.
#pragma once
#include <string>

namespace mactor::test {

inline std::string tiny_cp_flags() {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
         "--group-query-attention --num-query-groups 2 --position-embedding-type rope --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 "
         "--attention-dropout 0.1 --log-interval 1 --eval-interval 3 --eval-iters 1 --seed 11";
}

}  // namespace mactor::test
