// A hybrid Mamba model (pretrain_mamba, Megatron's mamba_stack_spec, pattern M*-M: Mamba,
// attention-only, MLP-only, Mamba) launched with `mactor`: TP2 (the mixer's segmented split),
// TP2 with sequence parallelism x DP2, PP2, DP2 and PP2 x DP2 with the distributed optimizer log
// the one-process losses, as does full recomputation (hidden dropout on, so the layers' masks must
// follow the global layer number); a checkpoint saved at iteration 3 resumes on the one-process
// losses (torch_dist saved by TP2 and resumed under PP2, the torch format in one process). Context
// parallelism (the mixer's heads split over the ranks, model/mamba_context_parallel.hpp; the
// attention layer's ring or all-to-all) under CP2, CP4 (each group on two ranks), TP2 x CP2 with
// SP (one group per tensor-parallel rank, on both context-parallel ranks) and CP2 x DP2 logs the
// one-process losses too, and its checkpoint resumes under TP2. What the hybrid stack does not
// build is refused with exit status 2, naming the flag.
#include <catch2/catch.hpp>
#include <string>

#include "tests/training/hybrid_flags.hpp"
#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

const std::string mamba = "pretrain_mamba";

std::string model_flags() { return hybrid_model_flags(); }

// Saved at iteration 3 by one process (or two with the layout `saved_by`), loaded by `ranks`
// processes with `layout` (a torch-format checkpoint loads only under the layout that saved it,
// as Megatron's).
void check_resume(const logged_losses& one, const std::string& format, const std::string& saved_by, int ranks,
                  const std::string& layout) {
  const auto dir = scratch_dir("hybrid_launch", format);
  launch(saved_by.empty() ? 1 : 2,
         model_flags() + " " + saved_by + " --ckpt-format " + format + " --save " + dir.string() +
             " --save-interval 6 --exit-interval 3",
         0, mamba);
  const auto resumed = launch(ranks, model_flags() + " --ckpt-format " + format + " " + layout + " --load " + dir.string(),
                              0, mamba);
  const auto got = parse_losses(resumed.out).train;
  REQUIRE(got.size() == 3);
  check_same(got, std::vector<double>(one.train.begin() + 3, one.train.end()),
             ("lm loss resumed from a " + format + " checkpoint, " + layout).c_str(), ranks);
}

}  // namespace

TEST_CASE("a hybrid Mamba model under TP2 and TP2 x DP2 with SP and PP2 and DP2 and PP2 x DP2 logs the one-process losses and resumes from its checkpoints") {
  const auto one = run_job(1, model_flags(), 4, 6, mamba);
  check_layout_against(one, 2, model_flags(), "--tensor-model-parallel-size 2", 4, 6, mamba);
  check_layout_against(one, 4, model_flags(),
                       "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer", 4, 6, mamba);
  check_layout_against(one, 2, model_flags(), "--pipeline-model-parallel-size 2", 4, 6, mamba);
  check_layout_against(one, 2, model_flags(), "", 4, 6, mamba);
  check_layout_against(one, 4, model_flags(), "--pipeline-model-parallel-size 2 --use-distributed-optimizer", 4, 6, mamba);
  // Full recomputation reruns each Mamba layer's forward (same dropout masks) before its backward.
  check_layout_against(one, 1, model_flags(), "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
                       4, 6, mamba);
  check_resume(one, "torch_dist", "--tensor-model-parallel-size 2", 2, "--pipeline-model-parallel-size 2");
  check_resume(one, "torch", "", 1, "");
}

TEST_CASE("a hybrid Mamba model under CP2, CP4, TP2 x CP2 with SP and CP2 x DP2 logs the one-process losses and resumes from its checkpoint") {
  const auto one = run_job(1, model_flags(), 4, 6, mamba);
  check_layout_against(one, 2, model_flags(), "--context-parallel-size 2", 4, 6, mamba);
  check_layout_against(one, 4, model_flags(), "--context-parallel-size 4 --cp-comm-type a2a", 4, 6, mamba);
  check_layout_against(one, 4, model_flags(),
                       "--tensor-model-parallel-size 2 --sequence-parallel --context-parallel-size 2 "
                       "--use-distributed-optimizer", 4, 6, mamba);
  check_layout_against(one, 4, model_flags(), "--context-parallel-size 2 --use-distributed-optimizer", 4, 6, mamba);
  check_resume(one, "torch_dist", "--context-parallel-size 2", 2, "--tensor-model-parallel-size 2");
}

// Fully sharded data parallelism shards the hybrid model's chunks as any other's.
TEST_CASE("a hybrid Mamba model under FSDP ZeRO-2, ZeRO-3 and torch FSDP2 with TP2 logs the one-process losses and its checkpoint resumes under PP2") {
  const auto one = run_job(1, model_flags(), 4, 6, mamba);
  const std::string fsdp = "--use-megatron-fsdp --ckpt-format fsdp_dtensor --data-parallel-sharding-strategy ";
  check_layout_against(one, 2, model_flags(), fsdp + "optim_grads", 4, 6, mamba);
  check_layout_against(one, 2, model_flags(), fsdp + "optim_grads_params", 4, 6, mamba);
  check_layout_against(one, 4, model_flags(), "--use-torch-fsdp2 --no-gradient-accumulation-fusion --tensor-model-parallel-size 2", 4, 6,
                       mamba);
  check_resume(one, "fsdp_dtensor", "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params", 4,
               "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads --pipeline-model-parallel-size 2");
}

// fp8 (Transformer Engine's linears in mamba_stack_spec, so the Mamba projections' GEMMs too).
// The first two iterations log the one-process losses to the log's digits; later ones drift
// apart by up to 7e-4 (measured, mxfp8 at lr 1e-2): the layouts' sums (the row-parallel
// all-reduce, the context-parallel gradient reduction) differ from one process's in the last
// bit, and fp8's rounding boundaries amplify that, as tests/training/fp8_amax_launch.test.cpp
// measures for GPT layers. The delayed recipe's amaxes of the Mamba projections are reduced
// over the tensor-parallel ranks as the attention's and MLP's are.
TEST_CASE("a hybrid Mamba model with fp8 projections under TP2 with SP and CP2 logs the one-process losses") {
  for (const std::string recipe : {"mxfp8 --fp8-format e4m3", "delayed --fp8-format hybrid --fp8-amax-history-len 4"}) {
    const std::string fp8 = model_flags() + " --mamba-num-heads 16 --mamba-head-dim 4 --fp8-recipe " + recipe;
    const auto one = run_job(1, fp8, 4, 6, mamba);
    REQUIRE(one.train.front() != one.train.back());
    for (const std::string layout : {"--tensor-model-parallel-size 2 --sequence-parallel", "--context-parallel-size 2"}) {
      const auto got = run_job(2, fp8 + " " + layout, 4, 6, mamba).train;
      check_same({got[0], got[1]}, {one.train[0], one.train[1]}, ("first lm losses, " + recipe + ", " + layout).c_str(),
                 2, 1e-6);
      check_same(got, one.train, ("lm loss, " + recipe + ", " + layout).c_str(), 2, 2e-3);
    }
  }
}

TEST_CASE("pretrain_mamba and pretrain_gpt refuse the specs and hybrid layouts they do not build with exit status 2") {
  const auto refused = [](const std::string& program, const std::string& flags, const std::string& named, int ranks = 1) {
    const auto r = launch(ranks, flags, 2, program);
    INFO(r.err);
    CHECK(r.err.find(named) != std::string::npos);
  };
  auto without_spec = model_flags();
  without_spec.replace(without_spec.find("--spec"), std::string("--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec").size(), "");
  refused(mamba, without_spec, "You must provide a valid Mamba layer spec via --spec");
  refused(mamba, without_spec + " --spec my.module my_spec", "known: 'megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec'");
  refused("pretrain_gpt", model_flags(), "run pretrain_mamba");
  refused(mamba, model_flags() + " --tensor-model-parallel-size 4", "multiples of --tensor-model-parallel-size 4", 4);
  refused(mamba, model_flags() + " --mamba-num-heads 6 --context-parallel-size 4",
          "nheads must be evenly divisible by tp_size * cp_size", 4);
  refused(mamba, model_flags() + " --mamba-num-heads 12 --mamba-num-groups 3 --context-parallel-size 2",
          "ngroups must be evenly divisible by tp_size * cp_size", 2);
  refused(mamba, model_flags() + " --hybrid-attention-ratio 0.5", "--hybrid-override-pattern");
  refused(mamba, model_flags() + " --mamba-num-groups 3", "--mamba-num-groups 3");
  refused(mamba, model_flags() + " --bf16 --fp8-format e4m3",
          "For FP8, the innermost dimension of the Mamba layer input projection output tensor must be a multiple of 16");
  refused(mamba, model_flags() + " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 1",
          "--decoder-first/last-pipeline-num-layers", 2);
}
