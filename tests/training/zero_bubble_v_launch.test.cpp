// ZB-V (--pipeline-schedule zbv) and DualPipeV (dualpipev) under `mactor`: two model chunks per
// rank in a V (rank 0 holds the embedding and the loss, the last rank hands its chunk 0's output
// to its own chunk 1), backwards split into input- and weight-gradient passes. Without gradient clipping every update is
// elementwise, so a ZB-V run must log 1F1B's losses and save 1F1B's weights and Adam moments bit
// for bit, though its ranks hold other layers; its checkpoints resume under 1F1B.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/training/checkpoint_compare.hpp"
#include "tests/training/launch_support.hpp"
#include "tests/training/tiny_moe_flags.hpp"

using namespace mactor::test;
namespace fs = std::filesystem;

namespace {

// No clipping: the global gradient norm (summed in an order that depends on which rank holds
// which layers) changes no update.
std::string dense_flags(int layers, bool tied = false) {
  return "--mock-data --num-layers " + std::to_string(layers) +
         " --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 4 --lr-decay-iters 4 "
         "--lr 1e-2 --min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 1 --clip-grad 0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --hidden-dropout 0.1 "
         "--attention-dropout 0.1 --log-interval 1 --eval-interval 2 --eval-iters 1 --seed 13" +
         std::string(tied ? "" : " --untie-embeddings-and-output-weights");
}

const char* two_chunks = " --num-virtual-stages-per-pipeline-rank 2 --pipeline-schedule zbv";
const char* dual_pipe = " --num-virtual-stages-per-pipeline-rank 2 --pipeline-schedule dualpipev";

// Runs `flags` under 1F1B and under `v_schedule` (ZB-V's or DualPipeV's flags) on `ranks`
// processes, saving at the last iteration: the same losses as printed, the same tensors.
void check_v_schedule_equals_one_f_one_b(int ranks, const std::string& flags, const std::string& name,
                                         const char* v_schedule = two_chunks) {
  INFO(name << ": " << flags << v_schedule);
  const auto one_dir = scratch_dir("zero_bubble_v", name + "_1f1b"), zbv_dir = scratch_dir("zero_bubble_v", name + "_v");
  const std::string save = " --save-interval 4 --save ";
  const auto one = launch(ranks, flags + " --pipeline-schedule 1f1b" + save + one_dir.string());
  const auto zbv = launch(ranks, flags + v_schedule + save + zbv_dir.string());
  const auto want = logged_values(one.out, "lm loss"), got = logged_values(zbv.out, "lm loss");
  REQUIRE(want.size() == 4);
  REQUIRE(want.front() != want[1]);
  CHECK(got == want);
  const auto want_norm = logged_values(one.out, "grad norm"), got_norm = logged_values(zbv.out, "grad norm");
  REQUIRE(got_norm.size() == want_norm.size());
  for (std::size_t i = 0; i < want_norm.size(); ++i) CHECK(got_norm[i] == Approx(want_norm[i]).epsilon(1e-6));
  CHECK(check_same_tensors(one_dir, zbv_dir, 4) > 0);
  std::printf("%s:%s equals 1F1B bit for bit (losses, weights, Adam moments) over 4 iterations\n", name.c_str(), v_schedule);
}

}  // namespace

TEST_CASE("ZB-V trains a dense GPT over PP2 and PP4 bit for bit as 1F1B does") {
  check_v_schedule_equals_one_f_one_b(2, dense_flags(4) + " --pipeline-model-parallel-size 2", "dense_pp2");
  check_v_schedule_equals_one_f_one_b(4, dense_flags(8) + " --pipeline-model-parallel-size 4", "dense_pp4");
}

TEST_CASE("ZB-V with the distributed optimizer and overlapped gradient reduction over PP2 x DP2, and MoE over "
          "PP2 x TP2 with sequence parallelism, equals 1F1B bit for bit") {
  check_v_schedule_equals_one_f_one_b(
      4, dense_flags(4) + " --pipeline-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 2000",
      "dense_pp2_dp2_overlap");
  check_v_schedule_equals_one_f_one_b(
      4, tiny_moe_flags() + " --train-iters 4 --lr-decay-iters 4 --clip-grad 0 --untie-embeddings-and-output-weights "
                            "--pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel",
      "moe_pp2_tp2");
}

TEST_CASE("DualPipeV trains a dense GPT over PP2 and PP2 x DP2, and MoE over PP2 x TP2, bit for bit as 1F1B does") {
  check_v_schedule_equals_one_f_one_b(2, dense_flags(4) + " --pipeline-model-parallel-size 2", "dualpipev_pp2", dual_pipe);
  check_v_schedule_equals_one_f_one_b(
      4, dense_flags(4) + " --pipeline-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 2000",
      "dualpipev_pp2_dp2_overlap", dual_pipe);
  check_v_schedule_equals_one_f_one_b(
      4, tiny_moe_flags() + " --train-iters 4 --lr-decay-iters 4 --clip-grad 0 --untie-embeddings-and-output-weights "
                            "--pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel",
      "dualpipev_moe_pp2_tp2", dual_pipe);
}

TEST_CASE("a tied embedding on the V placement: rank 0's embedding and output-layer copy are summed there, "
          "bit for bit as 1F1B's embedding group sums them, with the distributed optimizer too") {
  check_v_schedule_equals_one_f_one_b(2, dense_flags(4, true) + " --pipeline-model-parallel-size 2", "tied_pp2");
  check_v_schedule_equals_one_f_one_b(
      4, dense_flags(4, true) + " --pipeline-model-parallel-size 2 --use-distributed-optimizer", "tied_pp2_dp2", dual_pipe);
}

TEST_CASE("ZB-V with multi-latent attention and multi-token prediction (the MTP block on rank 0's last chunk), and "
          "an uneven split given per virtual stage by a layout, equals 1F1B bit for bit") {
  const std::string mla_mtp =
      "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
      "--multi-latent-attention --q-lora-rank 16 --kv-lora-rank 8 --qk-head-dim 8 --qk-pos-emb-head-dim 4 "
      "--v-head-dim 8 --qk-layernorm --normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
      "--mtp-num-layers 1 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 8 "
      "--train-iters 4 --lr 1e-2 --clip-grad 0 --init-method-std 0.05 --tokenizer-type NullTokenizer "
      "--vocab-size 4095 --log-interval 1 --eval-interval 2 --eval-iters 1 --seed 5 --pipeline-model-parallel-size 2";
  check_v_schedule_equals_one_f_one_b(2, mla_mtp, "mla_mtp_pp2");
  // Six layers as 1 | 2 | 2 | 1 over the V's four stages (rank 0: stages 0 and 3, rank 1: 1 and 2).
  const auto one_dir = scratch_dir("zero_bubble_v", "layout_1f1b"), v_dir = scratch_dir("zero_bubble_v", "layout_v");
  const std::string flags = dense_flags(6) + " --pipeline-model-parallel-size 2 --save-interval 4 --save ";
  const auto one = launch(2, flags + one_dir.string() + " --pipeline-schedule 1f1b");
  const auto v = launch(2, flags + v_dir.string() + " --pipeline-schedule zbv --pipeline-model-parallel-layout 'Et|tt|tt|tL'");
  CHECK(logged_values(v.out, "lm loss") == logged_values(one.out, "lm loss"));
  CHECK(check_same_tensors(one_dir, v_dir, 4) > 0);
}

TEST_CASE("a ZB-V checkpoint resumes under 1F1B and continues as the ZB-V run does") {
  const auto dir = scratch_dir("zero_bubble_v", "resume");
  const std::string flags = dense_flags(4) + " --pipeline-model-parallel-size 2 --save-interval 2 --save " + dir.string();
  const auto whole = launch(2, flags + two_chunks);
  const auto resumed = launch(2, flags + " --pipeline-schedule 1f1b --load " + dir.string() + " --ckpt-step 2");
  const auto want = iteration_lines(whole.out), got = iteration_lines(resumed.out);
  REQUIRE(want.size() == 4);
  REQUIRE(got.size() == 2);
  for (int it : {3, 4}) CHECK(logged_values(got.at(it), "lm loss") == logged_values(want.at(it), "lm loss"));
}

TEST_CASE("a ZB-V layout mactor does not build is refused, naming the fix") {
  const auto one_chunk = launch(2, dense_flags(4) + " --pipeline-model-parallel-size 2 --pipeline-schedule zbv", 2);
  CHECK(one_chunk.err.find("add --num-virtual-stages-per-pipeline-rank 2") != std::string::npos);
  const auto tied = launch(4, dense_flags(4, true) + " --pipeline-model-parallel-size 2 --overlap-grad-reduce" +
                                  std::string(two_chunks), 2);
  CHECK(tied.err.find("with a shared embedding (tied, or read by --mtp-num-layers) and --overlap-grad-reduce") !=
        std::string::npos);
  const auto uneven = launch(2, dense_flags(6) + " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 2" +
                                    std::string(two_chunks), 2);
  CHECK(uneven.err.find("give the split per virtual stage with --pipeline-model-parallel-layout") != std::string::npos);
  // 16 samples / (2 x dp 2) = 4 micro-batches, fewer than 2 x pp 4.
  const auto few = launch(8, dense_flags(8) + " --pipeline-model-parallel-size 4" + std::string(dual_pipe), 2);
  CHECK(few.err.find("--pipeline-schedule dualpipev needs at least 2 x --pipeline-model-parallel-size = 8 micro-batches") !=
        std::string::npos);
}
