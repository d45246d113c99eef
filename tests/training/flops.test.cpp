// Megatron's FLOPs formula, on two configurations worked out by hand.
#include <catch2/catch.hpp>

#include "config/parser.hpp"
#include "config/validate.hpp"
#include "training/flops.hpp"

using namespace mactor;

namespace {

config::megatron_args args_of(std::vector<std::string> flags) {
  auto a = config::parse_command_line(flags, "pretrain_gpt").args;
  REQUIRE(config::validate(a, {0, 1}).ok());
  return a;
}

}  // namespace

TEST_CASE("a plain GPT counts attention, MLP and logits as Megatron does") {
  // attention 12*2*64*64*(1 + 1 + 32/64/2) = 221184; MLP 12*2*64*256 = 393216; logits 6*64*1024 = 393216.
  auto a = args_of({"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
                    "--max-position-embeddings", "32", "--micro-batch-size", "8", "--train-iters", "1", "--lr", "1"});
  CHECK(training::num_floating_point_operations(a, 1024, 8) == Approx(8.0 * 32 * (221184 + 393216 + 393216)).epsilon(1e-12));
}

TEST_CASE("grouped-query attention, wider heads and SwiGLU change their terms") {
  // q projection 8*16 = 128 = 2h: attention 12*64*64*((1 + 2/8 + 64/64/2) * 2) = 172032;
  // MLP 12*64*128*1.5 = 147456; logits 6*64*256 = 98304.
  auto a = args_of({"--num-layers", "1", "--hidden-size", "64", "--num-attention-heads", "8", "--kv-channels", "16",
                    "--group-query-attention", "--num-query-groups", "2", "--swiglu", "--ffn-hidden-size", "128",
                    "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "2", "--train-iters", "1",
                    "--lr", "1"});
  CHECK(training::num_floating_point_operations(a, 256, 2) == Approx(2.0 * 64 * (172032 + 147456 + 98304)).epsilon(1e-12));
}

TEST_CASE("multi-latent attention counts Megatron's MLA attention term") {
  // q latent 16*(64 + 4*12 + 1) = 1808; kv latent 8*(64 + 4*14 + 1) = 968; shared RoPE key 64*4 =
  // 256; output 4*6*64 = 1536; scores 32*4*12/2 = 768 and values 32*4*6/2 = 384: attention
  // 6*5720 = 34320; MLP 12*64*256 = 196608; logits 6*64*256 = 98304.
  auto a = args_of({"--num-layers", "1", "--hidden-size", "64", "--num-attention-heads", "4", "--multi-latent-attention",
                    "--q-lora-rank", "16", "--kv-lora-rank", "8", "--qk-head-dim", "8", "--qk-pos-emb-head-dim", "4",
                    "--v-head-dim", "6", "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size",
                    "2", "--train-iters", "1", "--lr", "1"});
  CHECK(training::num_floating_point_operations(a, 256, 2) == Approx(2.0 * 32 * (34320 + 196608 + 98304)).epsilon(1e-12));
}

TEST_CASE("multi-token prediction adds a layer and a logits GEMM per depth and its norms and eh_proj") {
  // The first configuration with one MTP depth: attention and MLP over 3 layers (331776 + 589824),
  // norms and eh_proj 6*(3*64 + 2*64*64) = 50304, logits twice 6*64*1024 = 786432.
  auto a = args_of({"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
                    "--max-position-embeddings", "32", "--micro-batch-size", "8", "--train-iters", "1", "--lr", "1",
                    "--position-embedding-type", "rope", "--mtp-num-layers", "1"});
  CHECK(training::num_floating_point_operations(a, 1024, 8) ==
        Approx(8.0 * 32 * (331776 + 589824 + 50304 + 786432)).epsilon(1e-12));
}

TEST_CASE("a hybrid model (is-hybrid-model) counts Megatron's hybrid_flops from the pattern and from the ratios") {
  // h 64, s 32, b 2 (bs 64), heads 4 (p 1, g 4): attention 4*64*64*(64 + 64 + 16) = 2359296;
  // MLP (ffn 256) 4*4*64*64*64 = 4194304; Mamba (d_in 128, N 16, G 2, heads 128/32 = 4)
  // 2*64*64*(256 + 64 + 4) + 7*64*128*16 + 2*64*128*64 = 2654208 + 917504 + 1048576 = 4620288;
  // logits 2*64*64*512 = 4194304.
  const std::vector<std::string> base{"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
                                      "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
                                      "--train-iters", "1", "--lr", "1", "--is-hybrid-model", "--mamba-state-dim", "16",
                                      "--mamba-head-dim", "32", "--mamba-num-groups", "2"};
  auto with = [&](std::vector<std::string> more) {
    auto flags = base;
    flags.insert(flags.end(), more.begin(), more.end());
    return args_of(flags);
  };
  const double attention = 2359296, mlp = 4194304, mamba = 4620288, logits = 4194304;
  CHECK(training::num_floating_point_operations(with({"--hybrid-override-pattern", "M*-M"}), 512, 2) ==
        Approx(3 * (attention + mlp + 2 * mamba + logits)).epsilon(1e-12));
  // Ratios: round(4 * 0.25) = 1 attention layer, round(4 * 0.5) = 2 MLP layers, 1 Mamba layer.
  CHECK(training::num_floating_point_operations(
            with({"--hybrid-attention-ratio", "0.25", "--hybrid-mlp-ratio", "0.5"}), 512, 2) ==
        Approx(3 * (attention + 2 * mlp + mamba + logits)).epsilon(1e-12));
}

TEST_CASE("MoE counts the top-k routed experts and the shared expert on the MoE layers, an MTP depth as the last layer's kind") {
  // 4 layers (the last 3 MoE) and one MTP depth after a MoE layer: 5 layers, 4 of them MoE.
  // MLP 12*5*32*(64*1.5/5 + 32*2*1.5*4/5 + 16*1.5*4/5) = 221184; attention 12*5*32*32*2.5 = 153600;
  // MTP norms and eh_proj 6*(3*32 + 2*32*32) = 12864; logits 6*32*256*2 = 98304.
  auto a = args_of({"--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--ffn-hidden-size", "64",
                    "--swiglu", "--num-experts", "8", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "32",
                    "--moe-shared-expert-intermediate-size", "16", "--moe-layer-freq", "([0]*1+[1]*3)",
                    "--mtp-num-layers", "1", "--position-embedding-type", "rope", "--seq-length", "32",
                    "--max-position-embeddings", "32", "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1"});
  CHECK(training::num_floating_point_operations(a, 256, 1) == Approx(32.0 * (221184 + 153600 + 12864 + 98304)).epsilon(1e-12));
  // An integer frequency: layers 0 and 2 of 4 are MoE.
  // MLP 12*4*32*(64*1.5*2/4 + 32*2*1.5*2/4 + 16*1.5*2/4) = 165888; attention 12*4*32*32*2.5 = 122880; logits 49152.
  auto every_other = args_of({"--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4", "--ffn-hidden-size", "64",
                              "--swiglu", "--num-experts", "8", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "32",
                              "--moe-shared-expert-intermediate-size", "16", "--moe-layer-freq", "2", "--seq-length", "32",
                              "--max-position-embeddings", "32", "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1"});
  CHECK(training::num_floating_point_operations(every_other, 256, 1) == Approx(32.0 * (165888 + 122880 + 49152)).epsilon(1e-12));
}
