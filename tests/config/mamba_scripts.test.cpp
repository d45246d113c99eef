// Megatron's own hybrid Mamba flag sets (examples/mamba/train.sh at core_v0.15.0, and the
// hybrid functional test hybrid_mr_mcore_te_tp2_pp1_cp1) resolve under pretrain_mamba with no
// error; pretrain_gpt refuses the Mamba stack's spec.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "config/resolve.hpp"

using namespace mactor::config;

namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// examples/mamba/train.sh's options (800M), with its paths and tokenizer swapped for mock data.
const char* train_sh =
    "--tensor-model-parallel-size 1 --sequence-parallel --pipeline-model-parallel-size 1 --use-distributed-optimizer "
    "--overlap-param-gather --overlap-grad-reduce --untie-embeddings-and-output-weights --init-method-std 0.02 "
    "--position-embedding-type none --num-layers 48 --hidden-size 1024 --num-attention-heads 16 --group-query-attention "
    "--num-query-groups 8 --hybrid-attention-ratio 0.08 --hybrid-mlp-ratio 0.5 --seq-length 4096 "
    "--max-position-embeddings 4096 --train-samples 73242188 --lr-warmup-samples 50000 --lr-decay-samples 73192188 "
    "--mock-data --split 99,1,0 --tokenizer-type NullTokenizer --vocab-size 32000 --micro-batch-size 4 "
    "--global-batch-size 32 --lr 2.5e-4 --min-lr 2.5e-5 --lr-decay-style cosine --weight-decay 0.1 --clip-grad 1.0 "
    "--attention-dropout 0.0 --hidden-dropout 0.0 --disable-bias-linear --normalization RMSNorm --adam-beta1 0.9 "
    "--adam-beta2 0.95 --log-interval 10 --save-interval 2000 --eval-interval 2000 --eval-iters 32 --bf16 "
    "--use-mcore-models --spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec "
    "--no-create-attention-mask-in-dataloader";

// The hybrid TP2 functional test's model flags (its data and paths swapped for mock data).
const char* functional_tp2 =
    "--num-layers 44 --hidden-size 1024 --num-attention-heads 16 --group-query-attention --num-query-groups 8 "
    "--hybrid-override-pattern M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M- "
    "--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec --is-hybrid-model --micro-batch-size 4 "
    "--global-batch-size 32 --seq-length 1024 --max-position-embeddings 1024 --train-iters 50 --lr-decay-iters 320000 "
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 50000 --split 949,50,1 --lr 0.00015 --lr-decay-style cosine "
    "--min-lr 1.0e-5 --weight-decay 1e-2 --clip-grad 1.0 --lr-warmup-fraction .01 --log-interval 1 --eval-interval 1000 "
    "--eval-iters 10 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --use-distributed-optimizer "
    "--overlap-grad-reduce --overlap-param-gather --ckpt-format torch_dist --bf16 --attention-backend unfused";

}  // namespace

TEST_CASE("Megatron's hybrid Mamba example and functional-test flag sets resolve under pretrain_mamba") {
  for (const char* flags : {train_sh, functional_tp2}) {
    const auto r = resolve(words(flags), "pretrain_mamba", {0, 8});
    INFO(r.err);
    CHECK(!r.exit_status);
  }
  const auto gpt = resolve(words(train_sh), "pretrain_gpt", {0, 8});
  CHECK(gpt.exit_status == 2);
  CHECK(gpt.err.find("run pretrain_mamba") != std::string::npos);
}
