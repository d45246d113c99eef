// Megatron's other routing options through pretrain_gpt: sinkhorn load balancing, the router's
// input jitter, the probabilities on the experts' input, forced load balancing and the list
// form of the load-balancing types. Each logs one process's lm loss,
// validation loss and z_loss under DP2 and EP2 (fp32, relative difference <= 1e-5): sinkhorn
// balances each micro-batch alone, and the jitter is drawn from the seed, the layer and the
// micro-batch's place in the global sample order, so no layout changes the numbers. Each flag
// also changes the run against the same flags without it.
#include <catch2/catch.hpp>
#include <cmath>
#include <regex>
#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

constexpr std::size_t iterations = 6;

std::string routing_flags(const std::string& routing) {
  return "--mock-data --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 32 "
         "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-2 "
         "--min-lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 1 --clip-grad 1.0 --init-method-std 0.05 "
         "--tokenizer-type NullTokenizer --vocab-size 4095 --log-interval 1 --eval-interval 3 --eval-iters 1 "
         "--seed 9 --hidden-dropout 0 --attention-dropout 0 --disable-bias-linear --swiglu --num-experts 4 "
         "--moe-ffn-hidden-size 32 --moe-z-loss-coeff 0.01 " + routing;
}

struct routed_run {
  logged_losses losses;
  std::vector<double> z_loss;
};

routed_run run_routed(int ranks, const std::string& flags) {
  const auto r = launch(ranks, flags);
  routed_run m{parse_losses(r.out), logged_values(r.out, "z_loss")};
  REQUIRE(m.losses.train.size() == iterations);
  REQUIRE(m.losses.validation.size() == 4);
  REQUIRE(m.z_loss.size() == iterations);
  return m;
}

// One process, DP2 and EP2 agree; the flag moved the run away from `without`'s.
void check_routing(const std::string& name, const std::string& routing, const std::string& without) {
  const auto one = run_routed(1, routing_flags(routing));
  REQUIRE(one.losses.train.front() != one.losses.train.back());
  for (const std::string layout : {"", "--expert-model-parallel-size 2"}) {
    INFO(name << ", layout '" << layout << "'");
    const auto spread = run_routed(2, routing_flags(routing) + " " + layout);
    const std::string what = name + (layout.empty() ? ", DP2" : ", EP2");
    check_same(spread.losses.train, one.losses.train, (what + " lm loss").c_str(), 2);
    check_same(spread.losses.validation, one.losses.validation, (what + " validation lm loss").c_str(), 2);
    check_same(spread.z_loss, one.z_loss, (what + " z_loss").c_str(), 2);
  }
  const auto plain = run_routed(1, routing_flags(without));
  double most = 0;
  for (std::size_t i = 0; i < iterations; ++i)
    most = std::max(most, std::abs(plain.losses.train[i] - one.losses.train[i]) / one.losses.train[i]);
  std::printf("%s: lm loss at most %.3g from the run without it\n", name.c_str(), most);
  CHECK(most > 1e-5);
}

}  // namespace

TEST_CASE("sinkhorn load balancing logs one process's losses under DP2 and EP2") {
  check_routing("sinkhorn", "--moe-router-topk 2 --moe-router-load-balancing-type sinkhorn",
                "--moe-router-topk 2 --moe-router-load-balancing-type none");
}

TEST_CASE("the router's input jitter logs one process's losses under DP2 and EP2") {
  check_routing("input jitter", "--moe-router-topk 2 --moe-aux-loss-coeff 0.01 --moe-input-jitter-eps 0.1",
                "--moe-router-topk 2 --moe-aux-loss-coeff 0.01");
}

TEST_CASE("probabilities on the experts' input log one process's losses under DP2 and EP2") {
  check_routing("probs on input", "--moe-router-topk 1 --moe-router-pre-softmax --moe-apply-probs-on-input",
                "--moe-router-topk 1 --moe-router-pre-softmax");
}

TEST_CASE("forced load balancing logs one process's losses under DP2 and EP2") {
  // The random logits are drawn from the seed, the layer and the micro-batch, so no layout changes them.
  check_routing("forced balance", "--moe-router-topk 2 --moe-aux-loss-coeff 0.01 --moe-router-force-load-balancing",
                "--moe-router-topk 2 --moe-aux-loss-coeff 0.01");
}

TEST_CASE("the list form aux_loss seq_aux_loss logs both losses and one process's under DP2 and EP2") {
  const std::string routing = "--moe-router-topk 2 --moe-router-load-balancing-type aux_loss seq_aux_loss "
                              "--moe-aux-loss-coeff 0.01 0.001";
  const auto r = launch(1, routing_flags(routing));
  const auto lb = logged_values(r.out, "load_balancing_loss"), seq = logged_values(r.out, "seq_load_balancing_loss");
  REQUIRE(lb.size() == iterations);
  REQUIRE(seq.size() == iterations);
  // Each is E * sum_e f_e P_e over distributions: near 1 for a router at init, and the two differ.
  for (std::size_t i = 0; i < iterations; ++i) {
    CHECK(lb[i] > 0.5);
    CHECK(seq[i] > 0.5);
    CHECK(lb[i] != seq[i]);
  }
  for (const std::string layout : {"", "--expert-model-parallel-size 2"}) {
    const auto spread = launch(2, routing_flags(routing) + " " + layout);
    const std::string what = std::string("aux_loss seq_aux_loss") + (layout.empty() ? ", DP2" : ", EP2");
    check_same(parse_losses(spread.out).train, parse_losses(r.out).train, (what + " lm loss").c_str(), 2);
    check_same(logged_values(spread.out, "load_balancing_loss"), lb, (what + " load_balancing_loss").c_str(), 2);
    check_same(logged_values(spread.out, "seq_load_balancing_loss"), seq, (what + " seq_load_balancing_loss").c_str(), 2);
  }
}

TEST_CASE("MoE layer recomputation logs the same losses bit for bit with a lower memory peak") {
  // Longer sequences so that the experts' activations show in the peak.
  const std::string flags = routing_flags("--moe-router-topk 2 --moe-aux-loss-coeff 0.01") +
                            " --seq-length 128 --max-position-embeddings 128 --micro-batch-size 4 --global-batch-size 16";
  auto peak = [](const std::string& log) {
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex("max allocated: ([0-9.]+)")));
    return std::stod(m[1]);
  };
  const auto plain = launch(1, flags), moe = launch(1, flags + " --recompute-granularity selective --recompute-modules moe");
  const auto both = launch(1, flags + " --moe-layer-recompute");  // Megatron's mapping: core_attn and moe
  const auto p = parse_losses(plain.out), r = parse_losses(moe.out), b = parse_losses(both.out);
  REQUIRE(p.train.size() == iterations);
  CHECK(r.train == p.train);
  CHECK(r.validation == p.validation);
  CHECK(b.train == p.train);
  CHECK(logged_values(moe.out, "load_balancing_loss") == logged_values(plain.out, "load_balancing_loss"));
  CHECK(logged_values(moe.out, "z_loss") == logged_values(plain.out, "z_loss"));
  std::printf("max allocated (MB): plain %.4f, --recompute-modules moe %.4f, --moe-layer-recompute %.4f\n", peak(plain.out),
              peak(moe.out), peak(both.out));
  CHECK(peak(moe.out) < peak(plain.out));
  CHECK(peak(both.out) < peak(moe.out));
  // Under EP2 the rerun forward exchanges the tokens again in the backward, in every rank's order.
  const auto ep = launch(2, flags + " --moe-layer-recompute --expert-model-parallel-size 2");
  check_same(parse_losses(ep.out).train, p.train, "MoE recompute, EP2 lm loss", 2);
}

TEST_CASE("Megatron's refusals of the new routing options end the job at start with exit 2") {
  const auto topk = launch(1, routing_flags("--moe-router-topk 2 --moe-apply-probs-on-input"), 2);
  CHECK(topk.err.find("--moe-apply-probs-on-input only works with --moe-router-topk 1") != std::string::npos);
  const auto aux = launch(1, routing_flags("--moe-router-load-balancing-type sinkhorn --moe-aux-loss-coeff 0.01"), 2);
  CHECK(aux.err.find("sinkhorn does not support an aux loss") != std::string::npos);
  const auto eps = launch(1, routing_flags("--moe-input-jitter-eps 0"), 2);
  CHECK(eps.err.find("--moe-input-jitter-eps must be > 0") != std::string::npos);
  // global_aux_loss is built, alone and in the list form (its log entry after the others').
  const auto in_list = launch(1, routing_flags("--moe-router-load-balancing-type aux_loss global_aux_loss --moe-aux-loss-coeff 0.01 0.01"));
  CHECK(logged_values(in_list.out, "load_balancing_loss").size() == logged_values(in_list.out, "global_load_balancing_loss").size());
  CHECK(!logged_values(in_list.out, "global_load_balancing_loss").empty());
  const auto lengths = launch(1, routing_flags("--moe-router-load-balancing-type aux_loss seq_aux_loss --moe-aux-loss-coeff 0.01"), 2);
  CHECK(lengths.err.find("one value per --moe-router-load-balancing-type entry") != std::string::npos);
}
