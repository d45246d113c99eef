// The delayed fp8 recipe's amaxes max-reduced over the amax group (the tensor-, data- and
// context-parallel ranks of a stage, as Megatron's get_amax_reduction_group) in launched jobs: a
// TP2 run, with and without sequence parallelism, logs the one-process losses. Each rank's shard
// of a weight (and of a row-parallel input or column-parallel output gradient) has its own amax;
// reduced, every scale is the whole tensor's, the one process's. Without the reduction the first
// iteration's loss already differs by 2.0e-4 (measured; the one-process run takes the second of
// its four micro-batches with the scales the first left).
#include <catch2/catch.hpp>

#include <cctype>
#include <string>
#include <vector>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 4;

// Four micro-batches per step, fp32, a history of four amaxes taken by their maximum.
const std::string flags =
    "--mock-data --num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 --seq-length 32 "
    "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr-decay-iters 4 "
    "--lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --clip-grad 1.0 --init-method-std 0.05 "
    "--tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0 --attention-dropout 0 --log-interval 1 "
    "--eval-iters 0 --seed 5 --fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max";

}  // namespace

// The first iteration at the log's seven digits; the later ones within 1e-3 (see below).
void check_tp2(const std::vector<double>& got, const std::vector<double>& one, const char* what) {
  REQUIRE(got.size() == one.size());
  check_same({got.front()}, {one.front()}, what, 2, 1e-6);
  check_same(got, one, what, 2, 1e-3);
}

TEST_CASE("a TP2 delayed-fp8 run logs the one-process losses, its amaxes reduced over the tensor-parallel ranks") {
  const auto one = run_job(1, flags, 0, iterations);
  REQUIRE(one.train.front() != one.train.back());
  // Without the reduction the first iteration already differs by 2.0e-4: it is checked at the
  // log's seven digits. The later ones cannot be: the tensor-parallel sums (the row-parallel
  // all-reduce, and OpenBLAS's kernels for the halved shapes) differ from one process's by an ulp,
  // so a reduced amax can too, and a delayed scale (fp8_max / amax, not a power of two) then moves
  // every rounding boundary, which fp8 amplifies from step to step. How much depends on the CPU's
  // GEMM kernels: on the machines of earlier sessions TP2 measured 0 and TP2 + SP 1.2e-7 over these
  // four iterations (4 layers: 1.8e-6 at 2, 1.2e-4 to 1.7e-4 at 3); on a Xeon with AVX-512 FP16
  // (2026-12-06) iteration 1 is equal and iteration 2 differs by 9.2e-5. mxfp8's power-of-two
  // scales stay equal.
  check_tp2(run_job(2, flags + " --tensor-model-parallel-size 2", 0, iterations).train, one.train, "delayed fp8, TP2");
  check_tp2(run_job(2, flags + " --tensor-model-parallel-size 2 --sequence-parallel", 0, iterations).train, one.train,
            "delayed fp8, TP2 + SP");
}

namespace {

// Iterations 4..6 of a run resumed from its iteration-3 checkpoint, against the same run uninterrupted.
void check_resume_bitwise(int ranks, const std::string& extra, const char* what) {
  INFO(what);
  std::string name = what;
  for (auto& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const auto dir = scratch_dir("fp8_resume", name);
  const std::string run6 = flags + extra + " --train-iters 6 --lr-decay-iters 6";
  const auto whole = run_job(ranks, run6, 0, 6);
  REQUIRE(whole.train.size() == 6);
  run_job(ranks, run6 + " --exit-interval 3 --save-interval 3 --save " + dir.string(), 0, 3);
  const auto resumed = run_job(ranks, run6 + " --load " + dir.string(), 0, 3);
  REQUIRE(resumed.train.size() == 3);
  CHECK(resumed.train == std::vector<double>(whole.train.begin() + 3, whole.train.end()));
  if (ranks != 1) return;
  // Another history length is the user's to fix; a run without fp8 loads the checkpoint, its
  // fp8 states neither missing nor unexpected keys even under the strictest --dist-ckpt-strictness.
  const auto other = launch(1, run6 + " --load " + dir.string() + " --fp8-amax-history-len 2", 2);
  CHECK(other.err.find("resume with the --fp8-amax-history-len it was saved with") != std::string::npos);
  std::string no_fp8 = run6;
  no_fp8.erase(no_fp8.find(" --fp8-format"), std::string(" --fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max").size());
  REQUIRE(no_fp8.find("fp8") == std::string::npos);
  run_job(1, no_fp8 + " --load " + dir.string() + " --dist-ckpt-strictness raise_all", 0, 3);
}

}  // namespace

TEST_CASE("a delayed-fp8 run resumes bit for bit: checkpoints keep each linear's amax histories and scales") {
  // Without the state a resumed run starts from scale 1 and fresh histories: measured with the
  // restore left out, iteration 4 logs 8.353411 resumed against 8.35371 uninterrupted (one
  // process; TP2 and DP2 with fp8 parameters differ as much).
  check_resume_bitwise(1, "", "one process");
  check_resume_bitwise(2, " --tensor-model-parallel-size 2", "tp2");
  check_resume_bitwise(2, " --bf16 --use-distributed-optimizer --fp8-param-gather", "dp2 bf16, fp8 parameters");
  // Each expert's fp8 GEMMs have their own state, saved by the expert's own rank.
  check_resume_bitwise(2, " --disable-bias-linear --swiglu --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 32 "
                          "--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall", "ep2 MoE");
  // With --moe-router-padding-for-fp8 the all-to-all moves each rank's padding rows as well.
  check_resume_bitwise(2, " --disable-bias-linear --swiglu --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 32 "
                          "--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall "
                          "--moe-router-padding-for-fp8", "ep2 MoE, router padding");
  // Megatron's per-rank torch files carry them too (beside each tensor-parallel rank's model),
  // and a bf16 model's fp8-held weights are saved dequantized (their fp32 masters in distrib_optim.pt).
  check_resume_bitwise(1, " --ckpt-format torch", "one process, torch format");
  check_resume_bitwise(2, " --ckpt-format torch --tensor-model-parallel-size 2", "tp2, torch format");
  check_resume_bitwise(2, " --ckpt-format torch --bf16 --use-distributed-optimizer --fp8-param-gather",
                       "dp2 bf16, fp8 parameters, torch format");
}
