// Benchmark: `mactor simulate` on Megatron's own MoE references, as a markdown table.
//
// 1. Mixtral 8x7B: the flags of the example script in megatron/core/transformer/moe/README.md
//    (core_v0.15.0), 32 H100s (TP1 PP4 EP8, the distributed optimizer, the overlaps). The README's
//    headline "468 TFLOPS for Mixtral 8X7B bf16 training" (MCore v0.9) gives no layout or GPU
//    count, so it is a loose reference, not a target.
// 2. The DeepSeek-V3 proxy of Megatron's functional tests
//    (tests/functional_tests/test_cases/mixtral/deepseekv3_proxy_flex_tp1pp4emp16etc1cp1_release_sm:
//    14 layers of DeepSeek-V3's widths, MLA, 64 experts top-8 with a shared expert, MTP, TP2 PP4
//    EP16 with the layout Et*2|(tt|)*5t|tmL), whose golden values on DGX H100 give an iteration
//    time (11.59 s at iteration 10) and the allocated memory (33.3 GB). The test config does not
//    record its world size; 64 is the smallest its layout allows (EP16 x PP4), and its allocated
//    memory matches a 64-rank run's static memory best, so both 64 and 128 are printed.
//   bench_simulate_moe
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/simulation.hpp"

namespace {

namespace sim = mactor::simulate;

struct reference {
  const char* name;
  std::string flags;
  int world;
  const char* published;  // what Megatron reports, as text
};

const std::string mixtral =
    "--disable-bias-linear --seq-length 4096 --max-position-embeddings 32768 --num-layers 32 --hidden-size 4096 "
    "--ffn-hidden-size 14336 --num-attention-heads 32 --normalization RMSNorm --position-embedding-type rope --swiglu "
    "--untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8 --num-experts 8 "
    "--expert-model-parallel-size 8 --moe-router-topk 2 --moe-grouped-gemm --micro-batch-size 1 --global-batch-size 128 "
    "--lr 1e-4 --train-iters 1 --bf16 --overlap-grad-reduce --overlap-param-gather --tensor-model-parallel-size 1 "
    "--pipeline-model-parallel-size 4 --use-distributed-optimizer --vocab-size 32000";

const std::string deepseek_v3_proxy =
    "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --pipeline-model-parallel-layout Et*2|(tt|)*5t|tmL "
    "--expert-model-parallel-size 16 --expert-tensor-parallel-size 1 --use-distributed-optimizer --overlap-grad-reduce "
    "--overlap-param-gather --sequence-parallel --disable-bias-linear --micro-batch-size 1 --global-batch-size 512 "
    "--train-iters 1 --seq-length 4096 --num-layers 14 --hidden-size 7168 --ffn-hidden-size 18432 "
    "--num-attention-heads 128 --kv-channels 128 --max-position-embeddings 4096 --position-embedding-type rope "
    "--make-vocab-size-divisible-by 3232 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights "
    "--multi-latent-attention --mtp-num-layers 1 --mtp-loss-scaling-factor 0.1 --qk-layernorm --lr 1e-5 --num-experts 64 "
    "--moe-layer-freq ([0]*3+[1]*11) --moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048 "
    "--moe-router-topk 8 --moe-router-pre-softmax --moe-grouped-gemm --moe-router-group-topk 4 "
    "--moe-router-num-groups 8 --moe-router-topk-scaling-factor 2.5 --moe-router-score-function sigmoid "
    "--moe-router-enable-expert-bias --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
    "--qk-pos-emb-head-dim 64 --v-head-dim 128 --bf16 --vocab-size 256000";

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

int main() {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const std::vector<reference> refs = {
      {"Mixtral 8x7B (MoE README example)", mixtral, 32, "468 TFLOP/s/GPU (MCore v0.9, layout not given)"},
      {"DeepSeek-V3 proxy (functional test)", deepseek_v3_proxy, 64, "11.59 s/iteration, 33.3 GB allocated"},
      {"DeepSeek-V3 proxy (functional test)", deepseek_v3_proxy, 128, "11.59 s/iteration, 33.3 GB allocated"},
  };
  std::printf("system: %s\n", system.name.c_str());
  std::printf("| model | GPUs | Megatron reports | predicted s/iteration | TFLOP/s/GPU | exposed EP ms | "
              "last rank's static memory GB | bubble |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& ref : refs) {
    const auto r = mactor::config::resolve(words(ref.flags), "bench_simulate_moe", {0, ref.world},
                                           [](std::string_view) { return false; });
    if (r.exit_status) {
      std::printf("| %s | %d | refused: %s |\n", ref.name, ref.world, r.err.c_str());
      continue;
    }
    const auto s = sim::simulate_config(r.args, system, false);
    double ep = 0, bubble = 0;
    for (const auto& rank : s.iteration.ranks) ep = std::max(ep, rank.pipeline.exposed_ep_s), bubble = std::max(bubble, rank.bubble_fraction);
    const auto& last = s.memory.back();
    std::printf("| %s | %d | %s | %.2f | %.1f | %.0f | %.1f | %.3f |\n", ref.name, ref.world, ref.published,
                s.iteration.iteration_s, s.model_tflops_per_gpu, ep * 1e3,
                (last.parameters + last.gradients + last.optimizer) / 1e9, bubble);
  }
  return 0;
}
