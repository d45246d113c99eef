// The simulator's MoE, expert-parallel, multi-latent-attention and multi-token-prediction costs
// against what is written out here: the layers' compute adds up to Megatron's own FLOPs formula
// on every layout, a one-expert MoE costs what the dense layer costs (plus its router and the
// routed copy of its input), the expert exchange is two all-to-alls each way of topk x tokens x
// hidden per rank by the alpha-beta formula, and the experts' optimizer state shards over the
// expert-data-parallel group only. Hybrid Mamba layers: the same sum, and each kind's parameters
// and activations against a hand count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "config/resolve.hpp"
#include "simulate/cost_model.hpp"
#include "simulate/hybrid_layers.hpp"
#include "simulate/simulation.hpp"
#include "simulate/system_spec.hpp"

namespace sim = mactor::simulate;

namespace {

const std::vector<std::string> base_flags = {
    "--num-layers", "8", "--hidden-size", "512", "--num-attention-heads", "8", "--seq-length", "256",
    "--max-position-embeddings", "256", "--micro-batch-size", "2", "--global-batch-size", "32", "--vocab-size", "32000",
    "--bf16", "--train-iters", "1", "--lr", "1e-4", "--swiglu", "--disable-bias-linear", "--ffn-hidden-size", "1024",
    "--position-embedding-type", "rope"};

// 8 layers: 4 Mamba (16 heads of 64, 8 groups of state 128), 2 attention-only, 2 MLP-only.
const std::vector<std::string> hybrid = {"--is-hybrid-model", "--hybrid-override-pattern", "M*M-M*M-", "--normalization",
                                         "RMSNorm"};
const std::vector<std::string> hybrid_ratios = {"--is-hybrid-model", "--hybrid-attention-ratio", "0.25",
                                                "--hybrid-mlp-ratio", "0.25"};

const std::vector<std::string> moe_flags = {"--num-experts", "8", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "256",
                                            "--moe-layer-freq", "([0]+[1]*7)", "--moe-shared-expert-intermediate-size",
                                            "512"};

mactor::config::megatron_args args_of(std::vector<std::vector<std::string>> parts, int world) {
  std::vector<std::string> flags = base_flags;
  for (const auto& p : parts) flags.insert(flags.end(), p.begin(), p.end());
  const auto r = mactor::config::resolve(flags, "test", {0, world}, [](std::string_view) { return false; });
  INFO(r.err);
  REQUIRE(!r.exit_status);
  return r.args;
}

double replicas(const mactor::config::megatron_args& a) {
  return static_cast<double>(a.derived.data_parallel_size * a.distributed.tensor_model_parallel_size *
                             a.distributed.context_parallel_size);
}

}  // namespace

TEST_CASE("MoE, MLA, MTP and hybrid Mamba layers add up to Megatron's model FLOPs at the peak rate on every layout") {
  const double peak = 1e15;
  const std::vector<std::string> mla = {"--multi-latent-attention", "--q-lora-rank", "128", "--kv-lora-rank", "64",
                                        "--qk-head-dim", "32", "--qk-pos-emb-head-dim", "16", "--v-head-dim", "32"};
  const std::vector<std::string> mtp = {"--mtp-num-layers", "1"};
  struct layout {
    std::vector<std::vector<std::string>> parts;
    int world;
  };
  for (const auto& l : std::vector<layout>{
           {{moe_flags}, 1},
           {{moe_flags, {"--expert-model-parallel-size", "4"}}, 4},
           {{moe_flags, {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-tensor-parallel-size", "1",
                         "--expert-model-parallel-size", "2"}}, 4},
           {{moe_flags, mtp, {"--pipeline-model-parallel-size", "2"}}, 2},
           {{moe_flags, mla, mtp, {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2",
                                   "--expert-model-parallel-size", "2"}}, 4},
           {{mla, {"--tensor-model-parallel-size", "2"}}, 2},
           {{mla}, 1},
           {{mtp}, 1},
           {{hybrid}, 1},
           {{hybrid, {"--tensor-model-parallel-size", "2"}}, 2},
           {{hybrid, {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--pipeline-model-parallel-size", "2"}}, 4},
           {{hybrid, {"--pipeline-model-parallel-size", "2"}}, 4},
           {{hybrid_ratios, {"--pipeline-model-parallel-size", "2"}}, 2},
           {{hybrid, {"--context-parallel-size", "2"}}, 4},
           {{hybrid, {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--context-parallel-size", "2",
                      "--pipeline-model-parallel-size", "2"}}, 8}}) {
    const auto a = args_of(l.parts, l.world);
    const auto result = sim::simulate_config(a, sim::ideal_system(peak), false);
    double busy = 0;
    for (const auto& r : result.iteration.ranks) busy += r.pipeline.busy_s;
    INFO("world " << l.world << " layout " << l.parts.back().front());
    CHECK(busy * replicas(a) * peak == Approx(result.costs.model_flops_per_iteration).epsilon(1e-9));
  }
}

TEST_CASE("a MoE layer of one expert with top-1 routing costs a dense layer plus its router and routed input") {
  const std::vector<std::string> one_expert = {"--num-experts", "1", "--moe-router-topk", "1", "--moe-ffn-hidden-size",
                                               "1024", "--moe-router-pre-softmax"};
  const auto dense = sim::simulate_config(args_of({}, 1), sim::ideal_system(1e15), false);
  const auto moe = sim::simulate_config(args_of({one_expert}, 1), sim::ideal_system(1e15), false);
  const auto& d = dense.costs.chunks[0][0];
  const auto& m = moe.costs.chunks[0][0];
  CHECK(m.forward_s == Approx(d.forward_s).epsilon(1e-12));
  CHECK(m.backward_s == Approx(d.backward_s).epsilon(1e-12));
  const double h = 512, tokens = 2 * 256, layers = 8;
  CHECK(m.parameters - d.parameters == Approx(layers * h));       // the router's one row per expert
  CHECK(m.activation_bytes - d.activation_bytes == Approx(layers * tokens * h * 2));  // the routed bf16 copy
  CHECK(m.expert_parameters == Approx(layers * 3 * h * 1024));    // fc1 (gated, 2 x 1024) and fc2
}

TEST_CASE("the expert-parallel exchange is two all-to-alls each way of topk x tokens x hidden per rank") {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  for (int ep : {2, 8, 16}) {
    // 16 experts for ep 16 (each rank holds one); the bytes moved do not depend on it.
    const auto a = args_of({moe_flags, {"--expert-model-parallel-size", std::to_string(ep), "--num-experts",
                                        std::to_string(std::max(ep, 8))}},
                           ep);
    const auto result = sim::simulate_config(a, system, false);
    const auto& c = result.costs.chunks[0][0];
    // By hand: each rank sends topk x b x s rows of h bf16 values, 1/ep to each peer: the 7
    // (at most) in its 8-GPU node over NVLink, the others over InfiniBand at the same time.
    const double bytes = 2 * 2 * 256 * 512 * 2.0;
    const double near = std::min(ep, 8) - 1.0, far = ep - 1.0 - near;
    const auto over = [&](const sim::link_spec& link, double peers) {
      return peers * link.latency_s + peers / ep * bytes / (link.bandwidth_Bps * system.collective_efficiency);
    };
    const double one = std::max(over(system.intra_node, near), far > 0 ? over(system.inter_node, far) : 0.0);
    INFO("ep " << ep);
    CHECK(c.forward_ep_s == Approx(7 * 2 * one).epsilon(1e-12));  // 7 MoE layers, dispatch and combine
    CHECK(c.backward_ep_s == Approx(7 * 2 * one).epsilon(1e-12));
    double exposed = 0;
    for (const auto& r : result.iteration.ranks) exposed += r.pipeline.exposed_ep_s;
    const double microbatches = result.shape.num_microbatches;  // 32 / (2 x ep)
    CHECK(microbatches == 16 / ep);
    CHECK(exposed == Approx((c.forward_ep_s + c.backward_ep_s) * microbatches));
  }
}

TEST_CASE("with --delay-wgrad-compute the experts' weight gradients hide the dispatch's backward all-to-all") {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const std::vector<std::string> ep8 = {"--expert-model-parallel-size", "8", "--moe-token-dispatcher-type", "alltoall",
                                        "--overlap-moe-expert-parallel-comm"};
  const auto in_line = sim::simulate_config(args_of({moe_flags, ep8}, 8), system, false).costs.chunks[0][0];
  const auto delayed =
      sim::simulate_config(args_of({moe_flags, ep8, {"--delay-wgrad-compute"}}, 8), system, false).costs.chunks[0][0];
  // By hand: the experts' weight gradients repeat their forward GEMMs on topk x b x s = 1024 rows,
  // fc1 512 -> 2 x 256 (gated) and fc2 256 -> 512, at the file's bf16 rate.
  const double rows = 1024, wgrad_s = 2 * rows * (512.0 * 256 * 2 + 256.0 * 512) / (system.peak_flops_bf16 * system.compute_efficiency);
  const double one = in_line.forward_ep_s / 7 / 2;  // one all-to-all of one MoE layer (7 of them)
  REQUIRE(wgrad_s < one);  // this shape hides all of its weight gradients' time and no more
  CHECK(delayed.forward_ep_s == Approx(in_line.forward_ep_s).epsilon(1e-12));
  CHECK(delayed.backward_ep_s == Approx(7 * (2 * one - wgrad_s)).epsilon(1e-9));
  CHECK(in_line.backward_s - delayed.backward_s == Approx(7 * wgrad_s).epsilon(1e-9));
}

TEST_CASE("the experts' optimizer state shards over the expert-data-parallel group, the rest over data parallel") {
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const std::vector<std::string> dist = {"--use-distributed-optimizer"};
  const auto ep1 = sim::simulate_config(args_of({moe_flags, dist}, 8), system, false);
  const auto ep8 = sim::simulate_config(args_of({moe_flags, dist, {"--expert-model-parallel-size", "8"}}, 8), system, false);
  const double experts = 7 * 8 * 3 * 512 * 256.0;  // 7 MoE layers of 8 experts
  const auto& c1 = ep1.costs.chunks[0][0];
  const auto& c8 = ep8.costs.chunks[0][0];
  CHECK(c1.expert_parameters == Approx(experts));
  CHECK(c8.expert_parameters == Approx(experts / 8));
  CHECK(c1.parameters - c1.expert_parameters == Approx(c8.parameters - c8.expert_parameters));
  const double dense = c1.parameters - c1.expert_parameters;
  // Adam's two moments and the fp32 main copy: 12 bytes per parameter. EP 1: everything over dp 8;
  // EP 8: the experts have one replica each, so nothing shards them.
  CHECK(ep1.memory[0].optimizer == Approx((dense + experts) * 12 / 8));
  CHECK(ep8.memory[0].optimizer == Approx(dense * 12 / 8 + experts / 8 * 12));
}

TEST_CASE("a hybrid model's layer kinds hold the parameters and activations counted by hand") {
  const auto a = args_of({hybrid, {"--tensor-model-parallel-size", "2", "--sequence-parallel"}}, 2);
  // h 512, TP2, RMSNorm (512, on every rank). Mamba: 16 heads, d_inner 1024, 8 x 128 group
  // states, conv channels 1024 + 2048 = 3072, in_proj rows 1024 + 3072 + 16 = 4112.
  const double in_proj = 512.0 * 4112, conv = 3072.0 * 4 + 3072, per_head = 3 * 16, gated_norm = 1024, out_proj = 1024.0 * 512;
  CHECK(sim::mamba_layer_parameters(a) == Approx(512 + (in_proj + conv + per_head + gated_norm + out_proj) / 2));
  CHECK(sim::attention_only_layer_parameters(a) == Approx(512 + 4.0 * 512 * 512 / 2));  // QKV and proj
  CHECK(sim::mlp_only_layer_parameters(a) == Approx(512 + 3.0 * 512 * 1024 / 2));       // swiglu fc1, fc2
  // Activations, sequence parallel: s b h = 256 x 2 x 512 bytes-units per Korthikanti.
  const double sbh = 256.0 * 2 * 512, tokens = 256.0 * 2;
  CHECK(sim::attention_only_activation_bytes(a) == Approx(13 * sbh / 2));
  CHECK(sim::mlp_only_activation_bytes(a) == Approx((5 + 4 * 2) * sbh / 2));
  // Mamba, bf16: input and norm output (512 / 2 each), in_proj out 4112, conv out 3072, scan and
  // gated-norm outputs 1024 each, / 2.
  CHECK(sim::mamba_activation_bytes(a) == Approx(tokens * 2 * (512 + (4112 + 3072 + 2048) / 2.0)));
  // The attention-only and MLP-only layers together keep what one transformer layer keeps.
  for (const bool sp : {true, false}) {
    const auto b = args_of({hybrid, {"--tensor-model-parallel-size", "2"}, sp ? std::vector<std::string>{"--sequence-parallel"}
                                                                               : std::vector<std::string>{}}, 2);
    CHECK(sim::attention_only_activation_bytes(b) + sim::mlp_only_activation_bytes(b) ==
          Approx(sim::layer_activation_bytes(b, false)));
  }
}

TEST_CASE("a hybrid model's stages count their layers by kind, each one block of tensor-parallel collectives") {
  const auto a = args_of({hybrid, {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}}, 4);
  const auto result = sim::simulate_config(a, sim::ideal_system(1e15), false);
  // PP2 splits M*M-M*M- into M*M- and M*M-: each stage 2 Mamba, 1 attention, 1 MLP layer.
  const double layers = 2 * sim::mamba_layer_parameters(a) + sim::attention_only_layer_parameters(a) +
                        sim::mlp_only_layer_parameters(a);
  const double vocab = 32000.0 * 512 / 2;  // padded to a multiple of 128 x 2
  CHECK(result.costs.chunks[0][0].parameters == Approx(layers + vocab));
  CHECK(result.costs.chunks[1][0].parameters == Approx(layers + vocab + 2 * 512.0 / 2));  // + final norm
  // TP collectives on a real system: 4 hybrid blocks per stage cost half what 4 transformer layers do.
  const auto system = sim::read_system_file(std::string(MACTOR_SOURCE_DIR) + "/simulate/systems/h100_sxm_dgx.json");
  const auto dense = args_of({{"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}}, 4);
  const double hybrid_tp = sim::simulate_config(a, system, false).costs.chunks[0][0].forward_tp_s;
  const double dense_tp = sim::simulate_config(dense, system, false).costs.chunks[0][0].forward_tp_s;
  CHECK(hybrid_tp > 0);
  CHECK(hybrid_tp == Approx(dense_tp / 2));
}
