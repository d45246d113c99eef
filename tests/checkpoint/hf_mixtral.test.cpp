// The Mixtral export against PyPI transformers: a tiny MoE (4 experts, top-2, SwiGLU, RMSNorm, rope,
// GQA, untied) trained two iterations by pretrain_gpt and saved, converted with
// convert_checkpoint to-hf, loaded by MixtralForCausalLM (hf_reference.py); its masked
// cross-entropy sum on a fixed batch must match the forward_only of a gpt_model built from the
// same flags and loaded with the checkpoint's tensors to 1e-5. from-hf back must give the saved
// model tensors bitwise (under --moe-grouped-gemm the grouped names; the legacy GroupedMLP keeps SequentialMLP's), and pretrain_gpt --skip-train
// must log the same validation loss from the imported checkpoint as from the original (the
// grouped run in bf16, as Megatron's grouped GEMM requires; the loss comparison in fp32). The
// routings and layers MixtralForCausalLM cannot express are refused with status 2, each listed.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/save.hpp"
#include "checkpoint_test_util.hpp"
#include "hf_test_util.hpp"
#include "config/resolve.hpp"
#include "model/gpt_model.hpp"
#include "model/local_group.hpp"
#include "tests/tools/run_command.hpp"
#include "training/model_spec.hpp"

namespace ck = mactor::checkpoint;
namespace md = mactor::model;
namespace fs = std::filesystem;

namespace {

// The experts' three forms: SequentialMLP, TEGroupedMLP (--moe-grouped-gemm), and the legacy
// GroupedMLP (--moe-use-legacy-grouped-gemm too), whose checkpoint names are SequentialMLP's.
enum class experts_form { sequential, grouped, legacy };
const char* const form_names[] = {"sequential", "grouped", "legacy"};

std::vector<std::string> moe_flags(experts_form form) {
  std::vector<std::string> f = {
      "--mock-data", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
      "--group-query-attention", "--num-query-groups", "2", "--seq-length", "16",
      "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2",
      "--train-iters", "2", "--lr", "1e-2", "--tokenizer-type", "NullTokenizer", "--vocab-size", "4095",
      "--log-interval", "1", "--eval-interval", "1000", "--eval-iters", "1", "--seed", "5",
      "--init-method-std", "0.2", "--hidden-dropout", "0", "--attention-dropout", "0",
      "--disable-bias-linear", "--swiglu", "--normalization", "RMSNorm", "--position-embedding-type",
      "rope", "--rotary-base", "500000", "--norm-epsilon", "1e-6",
      "--untie-embeddings-and-output-weights", "--num-experts", "4", "--moe-router-topk", "2",
      "--moe-ffn-hidden-size", "32", "--moe-aux-loss-coeff", "0.01"};
  if (form != experts_form::sequential) f.insert(f.end(), {"--moe-grouped-gemm", "--bf16"});  // Megatron: grouped GEMM only in bf16
  if (form == experts_form::legacy) f.push_back("--moe-use-legacy-grouped-gemm");
  return f;
}

using ck::test::run_checked;
using ck::test::shell_words;

}  // namespace

TEST_CASE("a pretrain_gpt MoE checkpoint exports to MixtralForCausalLM with the same loss and imports back bitwise") {
  const fs::path root = ck::test::scratch_dir("hf-mixtral");
  const std::string bin = mactor::test::bin_dir();
  nlohmann::json reference_cases = nlohmann::json::array();
  std::vector<md::loss_and_count> ours;
  for (const auto form : {experts_form::sequential, experts_form::grouped, experts_form::legacy}) {
    const bool grouped = form == experts_form::grouped;  // TEGroupedMLP's names
    const std::string tag = form_names[int(form)];
    const fs::path ckpt = root / tag / "ckpt", hf = root / tag / "hf", back = root / tag / "back";
    const auto flags = moe_flags(form);
    run_checked(bin + "/pretrain_gpt" + shell_words(flags) + " --save " + ckpt.string() + " --save-interval 2");
    run_checked(bin + "/convert_checkpoint to-hf --load " + ckpt.string() + " --out " + hf.string());
    ck::checkpoint_reader original(ckpt.string());
    const auto config = nlohmann::json::parse(std::ifstream(hf / "config.json"));
    CHECK(config["architectures"][0] == "MixtralForCausalLM");
    CHECK(config["num_local_experts"] == 4);
    CHECK(config["num_experts_per_tok"] == 2);
    CHECK(config["intermediate_size"] == 32);

    // Our forward: the model pretrain_gpt builds from these flags, with the saved tensors, in
    // fp32 (the grouped run's bf16 computes in bf16; its saved weights are compared in fp32).
    auto resolved = mactor::config::resolve(moe_flags(experts_form::sequential), "pretrain_gpt", {0, 1});
    INFO(resolved.err);
    REQUIRE_FALSE(resolved.exit_status.has_value());
    const std::int64_t padded = original.common()["args"]["padded_vocab_size"].get<std::int64_t>();
    auto groups = md::make_local_groups(1);
    auto model_config = mactor::training::model_config_from_args(resolved.args, padded);
    model_config.moe.grouped_gemm = grouped;
    md::gpt_model model(model_config, *groups[0]);
    std::size_t expert_tensors = 0;
    for (auto& p : model.parameters()) {
      INFO(p.name);
      REQUIRE(original.has(p.name));
      const auto values = original.read_whole(p.name);
      REQUIRE(values.size() == p.numel);
      std::copy(values.begin(), values.end(), p.value_as<float>());
      expert_tensors += p.name.find(grouped ? "mlp.experts.linear_fc" : "mlp.experts.local_experts.") !=
                        std::string::npos;
    }
    CHECK(expert_tensors == 2 * 4 * 2);  // layers x experts x (fc1, fc2)
    const int mb = 2, seq = 16, n = mb * seq;
    std::mt19937 gen(11);
    std::uniform_int_distribution<int> token(0, int(padded) - 1);
    std::vector<std::int32_t> tokens(n), labels(n);
    std::vector<float> mask(n, 1.0f);
    for (int i = 0; i < n; ++i) tokens[i] = token(gen), labels[i] = token(gen);
    mask[5] = 0.0f;
    md::micro_batch batch;
    batch.tokens = tokens.data(), batch.labels = labels.data(), batch.loss_mask = mask.data();
    batch.micro_batch_size = mb;
    ours.push_back(model.forward_only(batch));
    auto rows = [&](const auto& v) {
      nlohmann::json j = nlohmann::json::array();
      for (int b = 0; b < mb; ++b) j.push_back(std::vector(v.begin() + b * seq, v.begin() + (b + 1) * seq));
      return j;
    };
    reference_cases.push_back({{"hf_dir", hf.string()}, {"architecture", "MixtralForCausalLM"},
                               {"tokens", rows(tokens)}, {"labels", rows(labels)}, {"loss_mask", rows(mask)}});

    // Back: the model tensors bitwise, under the names this flag set registers.
    run_checked(bin + "/convert_checkpoint from-hf --hf " + hf.string() + " --save " + back.string() +
                " --iteration 2" + (grouped ? " --moe-grouped-gemm" : ""));
    ck::checkpoint_reader imported(back.string());
    INFO(tag);
    ck::test::check_import_bitwise(original, imported);
    CHECK(imported.common()["args"]["num_experts"] == 4);
    CHECK(imported.common()["args"]["moe_grouped_gemm"] == grouped);

    // pretrain_gpt loads the import as it loads the original: the same validation loss.
    const std::string from_original = ck::test::skip_train_loss(flags, ckpt),
                      from_import = ck::test::skip_train_loss(flags, back);
    INFO(tag << ": original " << from_original << ", imported " << from_import);
    CHECK(from_original == from_import);
  }
  std::ofstream(root / "cases.json") << reference_cases.dump();
  const std::string source = MACTOR_SOURCE_DIR;
  REQUIRE(std::system((ck::test::python() + " " + source + "/tests/checkpoint/hf_reference.py " +
                       (root / "cases.json").string() + " " + (root / "out.json").string())
                          .c_str()) == 0);
  const auto results = nlohmann::json::parse(std::ifstream(root / "out.json"));
  REQUIRE(results.size() == ours.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double theirs = results[i]["loss_sum"].get<double>();
    CHECK(results[i]["num_tokens"].get<double>() == ours[i].num_tokens);
    UNSCOPED_INFO(std::setprecision(10) << form_names[i] << ": ours " << ours[i].loss_sum
                  << " transformers " << theirs << " relative difference "
                  << std::abs(ours[i].loss_sum - theirs) / std::abs(theirs));
    CHECK(std::abs(ours[i].loss_sum - theirs) <= 1e-5 * std::abs(theirs));
  }
}

TEST_CASE("convert_checkpoint refuses MoE routings and layers MixtralForCausalLM cannot express, listing each") {
  const std::string tool = std::string(MACTOR_BINARY_DIR) + "/bin/convert_checkpoint";
  const fs::path root = ck::test::scratch_dir("hf-mixtral-bad");
  nlohmann::json args = {{"num_layers", 2}, {"hidden_size", 32}, {"num_attention_heads", 4},
                         {"padded_vocab_size", 96}, {"max_position_embeddings", 16},
                         {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"},
                         {"swiglu", true}, {"add_bias_linear", false}, {"num_experts", 4},
                         {"moe_router_topk", 2}, {"moe_ffn_hidden_size", 32}};
  auto refused = [&](const std::string& tag, const nlohmann::json& changes, const std::vector<std::string>& reasons) {
    INFO(tag);
    auto a = args;
    a.update(changes);
    ck::rank_state s;
    s.common = nlohmann::json{{"args", a}};
    const fs::path dir = root / tag;
    ck::save(dir.string(), 1, 0, 1, std::move(s));
    const auto r = mactor::test::run_shell(tool + " to-hf --load " + dir.string() + " --out " + (dir / "hf").string());
    INFO(r.err);
    CHECK(r.status == 2);
    for (const auto& why : reasons) CHECK(r.err.find(why) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "hf"));
  };
  refused("pre-softmax", {{"moe_router_pre_softmax", true}}, {"moe_router_pre_softmax"});
  refused("sigmoid", {{"moe_router_score_function", "sigmoid"}, {"moe_router_enable_expert_bias", true}},
          {"moe_router_score_function", "moe_router_enable_expert_bias"});
  refused("dense-layers", {{"moe_layer_freq", 2}}, {"moe_layer_freq"});
  refused("dense-list", {{"moe_layer_freq", {1, 0}}}, {"moe_layer_freq"});
  refused("shared-scaled-grouped",
          {{"moe_shared_expert_intermediate_size", 16}, {"moe_router_topk_scaling_factor", 2.5},
           {"moe_router_num_groups", 2}, {"moe_router_group_topk", 1}},
          {"shared experts", "moe_router_topk_scaling_factor", "group-limited routing"});
  refused("dropping", {{"moe_expert_capacity_factor", 1.0}, {"moe_apply_probs_on_input", true}},
          {"moe_expert_capacity_factor", "moe_apply_probs_on_input"});
  refused("gpt2-style", {{"normalization", "LayerNorm"}, {"position_embedding_type", "learned_absolute"},
                         {"swiglu", false}, {"add_bias_linear", true}},
          {"Llama style", "biases"});
  // A list of ones is every layer; pre-softmax over all experts (k = E) sums to one, as Mixtral.
  ck::rank_state s;
  auto ok = args;
  ok.update({{"moe_layer_freq", {1, 1}}, {"moe_router_topk", 4}, {"moe_router_pre_softmax", true}});
  s.common = nlohmann::json{{"args", ok}};
  const fs::path dir = root / "accepted";
  ck::save(dir.string(), 1, 0, 1, std::move(s));
  const auto r = mactor::test::run_shell(tool + " to-hf --load " + dir.string() + " --out " + (dir / "hf").string());
  INFO(r.err);
  CHECK(r.err.find("cannot convert") == std::string::npos);  // fails later: the checkpoint has no tensors
  // from-hf: Mixtral configs mactor cannot run.
  const fs::path hf = root / "hf-jitter";
  fs::create_directories(hf);
  std::ofstream(hf / "config.json") << R"({"model_type": "mixtral", "num_hidden_layers": 1, "hidden_size": 32,
    "num_attention_heads": 4, "intermediate_size": 32, "max_position_embeddings": 16, "vocab_size": 96,
    "router_jitter_noise": 0.1, "sliding_window": 8})";
  const auto j = mactor::test::run_shell(tool + " from-hf --hf " + hf.string() + " --save " + (root / "x").string());
  INFO(j.err);
  CHECK(j.status == 2);
  CHECK(j.err.find("router_jitter_noise") != std::string::npos);
  CHECK(j.err.find("sliding_window") != std::string::npos);
  CHECK(mactor::test::run_shell(tool + " from-hf --hf " + hf.string() + " --save x --moe-grouped-gemm --bogus 1").status == 2);
}
