// A Mixtral-style tiny MoE (8 experts, top-2, SwiGLU, aux and z losses) through pretrain_gpt:
// every pipeline and data-parallel layout under `mactor -np 2/4` logs one process's lm loss
// each iteration (fp32, relative difference <= 1e-5). Data parallelism halves the micro-batches
// per rank, so the layouts agree only if the auxiliary losses' gradient is scaled by
// 1 / num_microbatches as Megatron's MoEAuxLossAutoScaler scales it. The log line carries
// track_moe_metrics' z_loss and load_balancing_loss after the lm loss, the same in every layout
// (summed over the pipeline's layers, averaged over the replicas and the MoE layers).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 8;

std::string moe_flags(const std::string& aux = "--moe-aux-loss-coeff 0.1 --moe-z-loss-coeff 0.01") {
  return "--mock-data --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 16 --train-iters 8 --lr 1e-2 "
         "--min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 "
         "--init-method-std 0.05 --tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 "
         "--eval-interval 4 --eval-iters 1 --seed 9 --hidden-dropout 0 --attention-dropout 0 --disable-bias-linear "
         "--swiglu --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 32 --moe-layer-freq '([0]*1+[1]*3)' " + aux;
}

struct moe_run {
  logged_losses losses;
  std::vector<double> z_loss, load_balancing_loss, seq_load_balancing_loss;
};

moe_run run_moe(int ranks, const std::string& flags) {
  const std::string command = launch_command(ranks, flags);
  const auto r = run_shell(command);
  INFO(command << "\nstdout tail:\n" << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0) << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  moe_run m{parse_losses(r.out), logged_values(r.out, "z_loss"), logged_values(r.out, "load_balancing_loss"),
            logged_values(r.out, "seq_load_balancing_loss")};
  REQUIRE(m.losses.train.size() == iterations);
  REQUIRE(m.losses.validation.size() == 4);
  // Megatron's order: lm loss, then the tracker's names (z_loss saved first).
  if (!m.z_loss.empty())
    CHECK(std::regex_search(r.out, std::regex("\\| lm loss: [-+0-9.eE]+ \\| z_loss: [-+0-9.eE]+ \\| "
                                            "load_balancing_loss: [-+0-9.eE]+ \\| loss scale")));
  return m;
}

const moe_run& alone() {
  static const moe_run one = run_moe(1, moe_flags());
  return one;
}

void check_layout(int ranks, const std::string& layout) {
  INFO("layout: " << layout);
  const auto& one = alone();
  const auto spread = run_moe(ranks, moe_flags() + " " + layout);
  check_same(spread.losses.train, one.losses.train, ("MoE lm loss, " + layout).c_str(), ranks);
  check_same(spread.losses.validation, one.losses.validation, ("MoE validation/test lm loss, " + layout).c_str(), ranks);
  REQUIRE(spread.z_loss.size() == iterations);
  REQUIRE(spread.load_balancing_loss.size() == iterations);
  check_same(spread.z_loss, one.z_loss, ("MoE z_loss, " + layout).c_str(), ranks);
  check_same(spread.load_balancing_loss, one.load_balancing_loss, ("MoE load_balancing_loss, " + layout).c_str(), ranks);
}

}  // namespace

TEST_CASE("a tiny MoE trains on one process, and its auxiliary losses change the run") {
  const auto& one = alone().losses;
  CHECK(one.train.back() < one.train.front());
  const auto without = run_job(1, moe_flags("--moe-aux-loss-coeff 0"), 4, iterations);
  CHECK(without.train.front() == one.train.front());  // the forward's lm loss holds no aux loss
  double most = 0;
  for (std::size_t i = 1; i < iterations; ++i)
    most = std::max(most, std::abs(without.train[i] - one.train[i]) / one.train[i]);
  CHECK(most > 1e-4);
  // The load-balancing loss (divided by its coefficient) is E * sum_e f_e P_e with f and P
  // distributions over the E = 8 experts: in (0, 8], near 1 for a balanced router at init.
  for (std::size_t i = 0; i < iterations; ++i) {
    CHECK(alone().load_balancing_loss[i] > 0.5);
    CHECK(alone().load_balancing_loss[i] <= 8.0);
    CHECK(alone().z_loss[i] > 0.0);
  }
}

TEST_CASE("a tiny MoE under PP2 logs one process's losses") { check_layout(2, "--pipeline-model-parallel-size 2"); }

TEST_CASE("a tiny MoE under DP2 logs one process's losses") { check_layout(2, ""); }

TEST_CASE("a tiny MoE under PP2 x DP2 with the alltoall dispatcher logs one process's losses") {
  check_layout(4, "--pipeline-model-parallel-size 2 --moe-token-dispatcher-type alltoall");
}

TEST_CASE("a MoE with sigmoid group-limited routing, a shared expert and seq_aux_loss under PP2 x DP2 logs one process's losses") {
  const std::string flags =
      moe_flags("--moe-router-topk 4 --moe-router-num-groups 4 --moe-router-group-topk 2 --moe-router-score-function "
                "sigmoid --moe-router-topk-scaling-factor 2.5 --moe-shared-expert-intermediate-size 48 "
                "--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 0.01");
  const auto one = run_moe(1, flags);
  const auto spread = run_moe(4, flags + " --pipeline-model-parallel-size 2");
  REQUIRE(one.seq_load_balancing_loss.size() == iterations);
  CHECK(one.load_balancing_loss.empty());
  check_same(spread.losses.train, one.losses.train, "MoE (sigmoid, groups, shared) lm loss, PP2 x DP2", 4);
  check_same(spread.seq_load_balancing_loss, one.seq_load_balancing_loss,
             "MoE (sigmoid, groups, shared) seq_load_balancing_loss, PP2 x DP2", 4);
}

// Megatron's context parallelism leaves the auxiliary losses' gradients unscaled by cp while the
// gradients are averaged over data x context parallel (forward_step scales only the main loss's
// reduction): a CP run is the one-process run with the load-balancing and z-loss coefficients
// divided by cp (the router's loss values, logged without their coefficients, are the same).
TEST_CASE("a tiny MoE under CP2 trains as one process with its auxiliary-loss coefficients halved, as Megatron") {
  const auto one = run_moe(1, moe_flags("--moe-aux-loss-coeff 0.05 --moe-z-loss-coeff 0.005"));
  const auto spread = run_moe(2, moe_flags() + " --context-parallel-size 2");
  check_same(spread.losses.train, one.losses.train, "MoE lm loss, CP2", 2);
  check_same(spread.losses.validation, one.losses.validation, "MoE validation/test lm loss, CP2", 2);
  check_same(spread.z_loss, one.z_loss, "MoE z_loss, CP2", 2);
  check_same(spread.load_balancing_loss, one.load_balancing_loss, "MoE load_balancing_loss, CP2", 2);
  // Not the one-process run with the full coefficients: the difference above is real.
  CHECK(alone().losses.train.back() != one.losses.train.back());
}

TEST_CASE("a MoE with seq_aux_loss and a shared expert under CP2 x PP2 trains as one process with halved coefficients") {
  const std::string shape = "--moe-shared-expert-intermediate-size 48 --moe-router-load-balancing-type seq_aux_loss ";
  const auto one = run_moe(1, moe_flags(shape + "--moe-aux-loss-coeff 0.005"));
  const auto spread = run_moe(4, moe_flags(shape + "--moe-aux-loss-coeff 0.01") +
                                     " --context-parallel-size 2 --pipeline-model-parallel-size 2");
  REQUIRE(one.seq_load_balancing_loss.size() == iterations);
  check_same(spread.losses.train, one.losses.train, "MoE (seq_aux_loss, shared) lm loss, CP2 x PP2", 4);
  check_same(spread.seq_load_balancing_loss, one.seq_load_balancing_loss, "MoE seq_load_balancing_loss, CP2 x PP2", 4);
}

TEST_CASE("with --delay-wgrad-compute an EP2 MoE logs the same numbers bit for bit") {
  // The EP-overlap flags Megatron requires for the delay: bf16, the alltoall dispatcher.
  const std::string ep2 = moe_flags() + " --bf16 --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall "
                                        "--overlap-moe-expert-parallel-comm";
  const auto run = [](const std::string& flags) { return iteration_lines(launch(2, flags).out); };
  const auto in_line = run(ep2), delayed = run(ep2 + " --delay-wgrad-compute");
  REQUIRE(in_line.size() == iterations);
  CHECK(delayed == in_line);  // every logged number: losses, aux losses, norms
}

namespace {

// The compute spans of `iteration` in a --profile trace, in the order they started: "F1.0", "B0.1".
std::vector<std::string> compute_order(const std::filesystem::path& trace_dir, int iteration) {
  std::vector<std::pair<double, std::string>> spans;
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(trace_dir)) {
    if (f.path().filename().string().rfind("rank0.", 0) != 0) continue;
    ++files;
    std::ifstream in(f.path());
    const auto trace = nlohmann::json::parse(in);
    for (const auto& e : trace.at("traceEvents"))
      if (e.value("cat", "") == "compute" && e.at("args").at("iteration") == iteration) {
        const std::string name = e.at("name");
        spans.push_back({e.at("ts").get<double>(), std::string(name[0] == 'f' ? "F" : "B") +
                                                       std::to_string(e.at("args").at("microbatch").get<int>()) + "." +
                                                       std::to_string(e.at("args").at("chunk").get<int>())});
      }
  }
  REQUIRE(files == 1);
  std::sort(spans.begin(), spans.end());
  std::vector<std::string> out;
  for (auto& [ts, name] : spans) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("under --overlap-moe-expert-parallel-comm the ranks run Megatron's combined 1F1B order and log the same numbers bit for bit") {
  // EP2 on 2 ranks (4 micro-batches per replica), and EP2 x PP2 with 2 virtual stages on 4.
  const std::string ep2 = moe_flags() + " --bf16 --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall";
  const auto run = [](int ranks, const std::string& flags) { return iteration_lines(launch(ranks, flags).out); };
  const auto traced = [](const std::filesystem::path& dir) {
    return " --overlap-moe-expert-parallel-comm --profile --use-pytorch-profiler --profile-step-start 2 "
           "--profile-step-end 3 --profile-ranks 0 --tensorboard-dir " + dir.string();
  };
  SECTION("without pipelining: F0, then each forward beside the previous backward") {
    const auto dir = scratch_dir("combined_1f1b", "no_pipelining");
    const auto plain = run(2, ep2), combined = run(2, ep2 + traced(dir));
    REQUIRE(plain.size() == iterations);
    CHECK(combined == plain);  // every logged number: losses, aux losses, norms
    CHECK(compute_order(dir, 2) == std::vector<std::string>{"F0.0", "F1.0", "B0.0", "F2.0", "B1.0", "F3.0", "B2.0", "B3.0"});
  }
  SECTION("interleaved: one more warmup forward, each steady forward beside an independent backward") {
    const auto dir = scratch_dir("combined_1f1b", "interleaved");
    const std::string pp2 = ep2 + " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1";
    const auto plain = run(4, pp2), combined = run(4, pp2 + traced(dir));
    REQUIRE(plain.size() == iterations);
    CHECK(combined == plain);
    // Rank 0 of pp 2, vp 2, 4 micro-batches: 5 warmup forwards (4 without the flag).
    CHECK(compute_order(dir, 2) == std::vector<std::string>{"F0.0", "F1.0", "F0.1", "F1.1", "F2.0", "F3.0", "B0.1", "F2.1",
                                                            "B1.1", "F3.1", "B0.0", "B1.0", "B2.1", "B3.1", "B2.0", "B3.0"});
  }
}
