// The attention and RoPE variant flags as the model sees them: Megatron's per-layer selectors
// (--no-rope-freq, --window-attn-skip-freq; an int N or a list) resolved to each layer, and the
// rest mapped onto gpt_model_config (training/model_spec.cpp).
#include <catch2/catch.hpp>

#include "config/parser.hpp"
#include "config/validate.hpp"
#include "training/model_spec.hpp"

using namespace mactor;

namespace {

model::gpt_model_config model_for(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4",
                                    "--seq-length", "16", "--max-position-embeddings", "16", "--micro-batch-size", "1",
                                    "--global-batch-size", "1", "--train-iters", "1", "--lr", "1e-3", "--mock-data",
                                    "--position-embedding-type", "rope"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  auto parsed = config::parse_command_line(flags, "pretrain_gpt");
  const auto report = config::validate(parsed.args, {0, 1});
  REQUIRE(report.ok());
  return training::model_config_from_args(parsed.args, 128, 0);
}

std::vector<bool> rope_layers(const model::gpt_model_config& c) {
  std::vector<bool> out;
  for (int l = 0; l < c.num_layers; ++l) out.push_back(c.layer_applies_rope(l));
  return out;
}

std::vector<int> windows(const model::gpt_model_config& c) {
  std::vector<int> out;
  for (int l = 0; l < c.num_layers; ++l) out.push_back(c.layer_attention_window(l));
  return out;
}

}  // namespace

TEST_CASE("per-layer RoPE: --no-rope-freq N skips RoPE in every N-th layer, a list in the layers it marks") {
  CHECK(rope_layers(model_for({})) == std::vector<bool>{true, true, true, true});
  // Megatron expands N to ([0] * (N - 1) + [1]) * (num_layers / N); 1 skips RoPE.
  CHECK(rope_layers(model_for({"--no-rope-freq", "2"})) == std::vector<bool>{true, false, true, false});
  CHECK(rope_layers(model_for({"--no-rope-freq", "4"})) == std::vector<bool>{true, true, true, false});
  CHECK(rope_layers(model_for({"--no-rope-freq", "[1]+[0]*3"})) == std::vector<bool>{false, true, true, true});
}

TEST_CASE("sliding windows: --window-size applies to every layer unless --window-attn-skip-freq gives some full attention") {
  CHECK(windows(model_for({})) == std::vector<int>{-1, -1, -1, -1});
  CHECK(windows(model_for({"--window-size", "(5,0)"})) == std::vector<int>{5, 5, 5, 5});
  // is_layer_window_attention: an int N gives layers N, 2N, ... (1-based) full attention.
  CHECK(windows(model_for({"--window-size", "5,0", "--window-attn-skip-freq", "2"})) == std::vector<int>{5, -1, 5, -1});
  // A list's 1s are the window layers.
  CHECK(windows(model_for({"--window-size", "5,0", "--window-attn-skip-freq", "[0,0,1,1]"})) ==
        std::vector<int>{-1, -1, 5, 5});
  CHECK(windows(model_for({"--window-attn-skip-freq", "2"})) == std::vector<int>{-1, -1, -1, -1});  // no window
}

TEST_CASE("the rotary and softmax flags reach the model config") {
  const auto plain = model_for({});
  CHECK_FALSE(plain.rotary_interleaved);
  CHECK(plain.rotary_seq_len_interpolation_factor == 1.0);
  CHECK_FALSE(plain.use_rope_scaling);
  CHECK(plain.softmax_type == model::softmax_kind::vanilla);
  const auto c = model_for({"--rotary-interleaved", "--rotary-seq-len-interpolation-factor", "4", "--use-rope-scaling",
                            "--rope-scaling-factor", "32", "--softmax-type", "learnable"});
  CHECK(c.rotary_interleaved);
  CHECK(c.rotary_seq_len_interpolation_factor == 4.0);
  CHECK(c.use_rope_scaling);
  CHECK(c.rope_scaling_factor == 32.0);
  CHECK(c.softmax_type == model::softmax_kind::learnable);
  CHECK(model_for({"--softmax-type", "off-by-one"}).softmax_type == model::softmax_kind::off_by_one);
}

namespace {

config::validation_report report_for(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
                                    "--seq-length", "16", "--max-position-embeddings", "16", "--micro-batch-size", "1",
                                    "--global-batch-size", "1", "--train-iters", "1", "--lr", "1e-3", "--mock-data"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  auto parsed = config::parse_command_line(flags, "pretrain_gpt");
  return config::validate(parsed.args, {0, 1});
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("the query/key L2 norm (--qk-l2-norm) reaches the attention where gpt_builders passes it: the TE layer spec and the MoE block spec") {
  CHECK(model_for({"--qk-l2-norm"}).qk_l2_norm);  // --transformer-impl transformer_engine, the default
  CHECK(model_for({"--qk-l2-norm", "--qk-layernorm"}).qk_l2_norm);
  CHECK_FALSE(model_for({}).qk_l2_norm);
  // The local spec without experts is built without it (Megatron ignores the flag there); mactor warns.
  CHECK_FALSE(model_for({"--qk-l2-norm", "--transformer-impl", "local"}).qk_l2_norm);
  const auto local = report_for({"--qk-l2-norm", "--transformer-impl", "local"});
  CHECK(local.ok());
  CHECK(mentions(local.warnings, "--qk-l2-norm has no effect here"));
  CHECK(model_for({"--qk-l2-norm", "--transformer-impl", "local", "--num-experts", "2", "--moe-router-topk", "2",
                  "--disable-bias-linear"}).qk_l2_norm);
}

TEST_CASE("the query/key L2 norm (--qk-l2-norm) with --multi-latent-attention is refused as Megatron's layer specs assert") {
  const auto r = report_for({"--qk-l2-norm", "--multi-latent-attention", "--q-lora-rank", "16", "--kv-lora-rank", "8",
                             "--qk-head-dim", "8", "--qk-pos-emb-head-dim", "8", "--v-head-dim", "8"});
  CHECK_FALSE(r.ok());
  CHECK(mentions(r.errors, "qk_l2_norm is not supported with MLA"));
  // The local spec without experts never sees the flag, so Megatron builds MLA there.
  const auto local = report_for({"--qk-l2-norm", "--transformer-impl", "local", "--multi-latent-attention", "--q-lora-rank",
                                 "16", "--kv-lora-rank", "8", "--qk-head-dim", "8", "--qk-pos-emb-head-dim", "8",
                                 "--v-head-dim", "8"});
  CHECK_FALSE(mentions(local.errors, "qk_l2_norm"));
}

TEST_CASE("the query/key L2 norm (--qk-l2-norm) with --qk-layernorm and --test-mode is refused: the check reads norm weights L2Norm lacks") {
  const auto r = report_for({"--qk-l2-norm", "--qk-layernorm", "--test-mode"});
  CHECK(mentions(r.errors, "--test-mode with --qk-layernorm"));
  CHECK(report_for({"--qk-l2-norm", "--test-mode"}).ok());
}
