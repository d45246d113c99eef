// `mactor simulate` as a user runs it: a layout pretrain_gpt refuses is refused with the same
// message, what the simulator cannot model is refused by name, and Llama-3 405B on 16,384 H100s
// (TP8 PP16 DP128, Meta's published layout) simulates and writes a timeline.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "../tools/run_command.hpp"

using mactor::test::run_shell;

namespace {

const std::string systems = std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/";

std::string simulate(const std::string& flags) {
  return mactor::test::mactor_bin() + " simulate --system " + systems + "a100_80gb_dgx.json " + flags;
}

// The lines after "error: " in an argparse-style message, without the program name.
std::string error_texts(const std::string& err) {
  std::string out;
  for (std::size_t at = err.find("error: "); at != std::string::npos; at = err.find("error: ", at + 1))
    out += err.substr(at + 7, err.find('\n', at) - at - 7) + "\n";
  return out;
}

const std::string gpt = "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 "
                        "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 --vocab-size 1000 ";

}  // namespace

TEST_CASE("mactor simulate refuses a layout with pretrain_gpt's own message") {
  const std::string bad = gpt + "--tensor-model-parallel-size 3 --train-iters 1 --lr 1e-4";
  const auto simulated = run_shell(simulate(bad + " --world-size 6"));
  const auto trained = run_shell("MACTOR_RANK=0 MACTOR_WORLD_SIZE=6 " + mactor::test::bin_dir() + "/pretrain_gpt " + bad);
  CHECK(simulated.status == 2);
  CHECK(trained.status == 2);
  INFO(simulated.err << "\n---\n" << trained.err);
  const std::string texts = error_texts(simulated.err);
  CHECK(texts.find("tensor-model-parallel") != std::string::npos);
  CHECK(texts == error_texts(trained.err));
}

TEST_CASE("mactor simulate refuses what it cannot model by the flag's name") {
  const auto hybrid_moe = run_shell(simulate(gpt + "--is-hybrid-model --hybrid-override-pattern M*M- --num-experts 4 "
                                                   "--context-parallel-size 2 --world-size 2"));
  CHECK(hybrid_moe.status == 2);
  CHECK(hybrid_moe.err.find("--num-experts with a hybrid model is not modelled") != std::string::npos);
  // 8 Mamba heads (2 x 256 / 64) do not split over 16 context-parallel ranks.
  const auto hybrid_heads = run_shell(
      simulate(gpt + "--is-hybrid-model --hybrid-override-pattern M*M- --context-parallel-size 16 --world-size 16"));
  CHECK(hybrid_heads.status == 2);
  CHECK(hybrid_heads.err.find("nheads must be evenly divisible by tp_size * cp_size") != std::string::npos);
  const auto pattern_only = run_shell(simulate(gpt + "--hybrid-override-pattern M*M-"));
  CHECK(pattern_only.status == 2);
  CHECK(pattern_only.err.find("--hybrid-override-pattern without --is-hybrid-model") != std::string::npos);
  const auto no_system = run_shell(mactor::test::mactor_bin() + " simulate " + gpt);
  CHECK(no_system.status == 2);
  CHECK(no_system.err.find("--system") != std::string::npos);
}

TEST_CASE("mactor simulate runs Llama-3 405B on 16384 H100s and writes a timeline") {
  char dir_template[] = "/tmp/mactor_simulate_XXXXXX";
  const std::string timeline = std::string(::mkdtemp(dir_template)) + "/timeline.json";
  const std::string llama405b =
      "--num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248 --num-attention-heads 128 "
      "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
      "--micro-batch-size 1 --global-batch-size 2048 --vocab-size 128256 --swiglu --normalization RMSNorm "
      "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear --bf16 "
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --decoder-first-pipeline-num-layers 7 "
      "--decoder-last-pipeline-num-layers 7 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce "
      "--recompute-activations --world-size 16384 --timeline " + timeline;
  const auto r = run_shell(mactor::test::mactor_bin() + " simulate --system " + systems + "h100_sxm_dgx.json " + llama405b);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("tp 8 x cp 1 x pp 16 x dp 128") != std::string::npos);
  CHECK(r.out.find("MFU") != std::string::npos);
  const auto trace = nlohmann::json::parse(mactor::test::slurp(timeline));
  int computes = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("cat") == "compute") ++computes;
  CHECK(computes == 16 * 2 * 16);  // pp ranks x (forward + backward) x microbatches
  std::remove(timeline.c_str());
}

TEST_CASE("mactor simulate groups a batch ramp-up's iterations as Megatron's calculator runs them") {
  const auto r = run_shell(simulate("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
                                    "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 64 "
                                    "--rampup-batch-size 16 16 320 --train-samples 100000 --pipeline-model-parallel-size 4 "
                                    "--world-size 16 --bf16"));
  INFO(r.err);
  REQUIRE(r.status == 0);
  // 320 samples over 3 increments: 7 iterations of 16, 4 of 32, 2 of 48, then 64 to 100000 samples.
  CHECK(r.out.find("iterations 1-7 | global batch size: 16 | microbatches: 4 |") != std::string::npos);
  CHECK(r.out.find("iterations 8-11 | global batch size: 32 | microbatches: 8 |") != std::string::npos);
  CHECK(r.out.find("iterations 12-13 | global batch size: 48 | microbatches: 12 |") != std::string::npos);
  CHECK(r.out.find("iterations 14-1570 | global batch size: 64 | microbatches: 16 |") != std::string::npos);
}
