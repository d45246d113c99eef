// The Hugging Face export against PyPI transformers: a perturbed gpt_model is saved as a
// 1-rank checkpoint, converted with build/bin/convert_checkpoint to-hf, loaded by
// GPT2LMHeadModel / LlamaForCausalLM (hf_reference.py), and its loss on a fixed batch must match
// our forward_only loss to 1e-5; from-hf back must give bitwise equal tensors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <random>
#include <sys/wait.h>

#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/save.hpp"
#include "checkpoint_test_util.hpp"
#include "model/gpt_model.hpp"
#include "model/local_group.hpp"
#include "tests/tools/run_command.hpp"

namespace ck = mactor::checkpoint;
namespace md = mactor::model;
namespace fs = std::filesystem;

namespace {

struct export_case {
  std::string tag, architecture;
  md::gpt_model_config config;
};

md::gpt_model_config base_config() {
  md::gpt_model_config c;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.num_attention_heads = 4;
  c.seq_length = 16;
  c.max_position_embeddings = 20;
  c.padded_vocab_size = 96;
  c.attention_dropout = 0.0f;
  c.hidden_dropout = 0.0f;
  return c;
}

std::vector<export_case> cases() {
  std::vector<export_case> out;
  auto gpt2 = base_config();  // LayerNorm, learned positions, tanh GeLU, biases, tied
  gpt2.gelu_tanh_approximation = true;
  out.push_back({"gpt2", "GPT2LMHeadModel", gpt2});
  auto gpt2_untied = gpt2;  // exact erf GeLU (--no-bias-gelu-fusion), separate output layer
  gpt2_untied.gelu_tanh_approximation = false;
  gpt2_untied.untie_embeddings_and_output_weights = true;
  out.push_back({"gpt2-untied-erf", "GPT2LMHeadModel", gpt2_untied});
  auto llama = base_config();  // RMSNorm, rope, SwiGLU, no biases, untied, GQA
  llama.normalization = md::normalization_kind::rms_norm;
  llama.position_embedding_type = md::position_embedding_kind::rope;
  llama.swiglu = true;
  llama.add_bias_linear = false;
  llama.untie_embeddings_and_output_weights = true;
  llama.num_query_groups = 2;
  llama.rotary_base = 500000.0;
  llama.norm_epsilon = 1e-6f;
  out.push_back({"llama-gqa", "LlamaForCausalLM", llama});
  auto llama_qkv = llama;  // --add-qkv-bias, one group per head, tied
  llama_qkv.add_qkv_bias = true;
  llama_qkv.num_query_groups = 0;
  llama_qkv.untie_embeddings_and_output_weights = false;
  out.push_back({"llama-qkv-bias", "LlamaForCausalLM", llama_qkv});
  // Llama 3.1's frequency scaling (--use-rope-scaling): rope_type llama3. A base of 5e5 puts most
  // of the 8 frequencies' wavelengths past 2048 positions, where the scaling acts.
  auto llama31 = llama;
  llama31.use_rope_scaling = true, llama31.rope_scaling_factor = 16.0;
  out.push_back({"llama-rope-scaling", "LlamaForCausalLM", llama31});
  auto linear = llama;  // --rotary-seq-len-interpolation-factor: rope_type linear
  linear.rotary_seq_len_interpolation_factor = 4.0;
  out.push_back({"llama-linear-rope", "LlamaForCausalLM", linear});
  return out;
}

// The checkpoint's common "args", in Megatron's dest names, as the trainer writes them.
nlohmann::json megatron_args(const md::gpt_model_config& c) {
  const bool rms = c.normalization == md::normalization_kind::rms_norm;
  return {{"num_layers", c.num_layers}, {"hidden_size", c.hidden_size},
          {"ffn_hidden_size", c.ffn_hidden_size}, {"num_attention_heads", c.num_attention_heads},
          {"kv_channels", nullptr}, {"group_query_attention", c.num_query_groups > 0},
          {"num_query_groups", c.num_query_groups > 0 ? c.num_query_groups : 1},
          {"normalization", rms ? "RMSNorm" : "LayerNorm"}, {"swiglu", c.swiglu},
          {"position_embedding_type",
           c.position_embedding_type == md::position_embedding_kind::rope ? "rope" : "learned_absolute"},
          {"untie_embeddings_and_output_weights", c.untie_embeddings_and_output_weights},
          {"add_bias_linear", c.add_bias_linear}, {"add_qkv_bias", c.add_qkv_bias},
          {"openai_gelu", false}, {"bias_gelu_fusion", c.gelu_tanh_approximation},
          {"norm_epsilon", c.norm_epsilon}, {"rotary_base", c.rotary_base},
          {"use_rope_scaling", c.use_rope_scaling}, {"rope_scaling_factor", c.rope_scaling_factor},
          {"rotary_seq_len_interpolation_factor",
           c.rotary_seq_len_interpolation_factor != 1.0 ? nlohmann::json(c.rotary_seq_len_interpolation_factor)
                                                        : nlohmann::json(nullptr)},
          {"max_position_embeddings", c.max_position_embeddings},
          {"seq_length", c.seq_length}, {"padded_vocab_size", c.padded_vocab_size}};
}

int run(const std::string& command) {
  INFO(command);
  return std::system((command + " > /dev/null").c_str());
}

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

}  // namespace

TEST_CASE("GPT-2 and Llama style checkpoints export to transformers with the same loss and import back bitwise") {
  const fs::path root = ck::test::scratch_dir("hf");
  const std::string tool = std::string(MACTOR_BINARY_DIR) + "/bin/convert_checkpoint";
  const int mb = 2;
  nlohmann::json reference_cases = nlohmann::json::array();
  std::vector<md::loss_and_count> ours;
  for (const auto& ec : cases()) {
    auto groups = md::make_local_groups(1);
    md::gpt_model model(ec.config, *groups[0]);
    std::mt19937 gen(7);
    std::normal_distribution<float> noise(0.0f, 0.2f);
    ck::rank_state state;
    for (auto& p : model.parameters()) {
      for (std::size_t i = 0; i < p.numel; ++i) p.value_as<float>()[i] += noise(gen);  // biases and norms too
      state.pieces.push_back(ck::whole_tensor(p.name, p.full_shape,
                                              std::vector<float>(p.value_as<float>(), p.value_as<float>() + p.numel)));
    }
    state.common = nlohmann::json{{"iteration", 3}, {"args", megatron_args(ec.config)}};
    const fs::path ckpt = root / ec.tag / "ckpt", hf = root / ec.tag / "hf";
    ck::save(ckpt.string(), 3, 0, 1, std::move(state));
    REQUIRE(run(tool + " to-hf --load " + ckpt.string() + " --out " + hf.string()) == 0);

    const int n = mb * ec.config.seq_length;
    std::vector<std::int32_t> tokens(n), labels(n);
    std::vector<float> mask(n, 1.0f);
    std::uniform_int_distribution<int> token(0, ec.config.padded_vocab_size - 1);
    for (int i = 0; i < n; ++i) tokens[i] = token(gen), labels[i] = token(gen);
    mask[3] = mask[n - 1] = 0.0f;
    md::micro_batch batch;
    batch.tokens = tokens.data(), batch.labels = labels.data(), batch.loss_mask = mask.data();
    batch.micro_batch_size = mb;
    ours.push_back(model.forward_only(batch));
    auto rows = [&](const auto& v) {
      nlohmann::json j = nlohmann::json::array();
      for (int b = 0; b < mb; ++b)
        j.push_back(std::vector(v.begin() + b * ec.config.seq_length,
                                v.begin() + (b + 1) * ec.config.seq_length));
      return j;
    };
    reference_cases.push_back({{"hf_dir", hf.string()}, {"architecture", ec.architecture},
                               {"tokens", rows(tokens)}, {"labels", rows(labels)},
                               {"loss_mask", rows(mask)}});

    const fs::path back = root / ec.tag / "back";
    REQUIRE(run(tool + " from-hf --hf " + hf.string() + " --save " + back.string() + " --iteration 3") == 0);
    ck::checkpoint_reader original(ckpt.string()), imported(back.string());
    CHECK(original.names() == imported.names());
    for (const auto& name : original.names()) {
      INFO(ec.tag << ": " << name);
      CHECK(ck::test::bitwise_equal(original.read_whole(name), imported.read_whole(name)));
    }
    CHECK(imported.common()["args"]["padded_vocab_size"] == ec.config.padded_vocab_size);
  }
  std::ofstream(root / "cases.json") << reference_cases.dump();
  const std::string source = MACTOR_SOURCE_DIR;
  REQUIRE(std::system((python() + " " + source + "/tests/checkpoint/hf_reference.py " +
                       (root / "cases.json").string() + " " + (root / "out.json").string())
                          .c_str()) == 0);
  std::ifstream in(root / "out.json");
  const auto results = nlohmann::json::parse(in);
  REQUIRE(results.size() == ours.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    INFO(reference_cases[i]["architecture"] << " " << cases()[i].tag);
    const double theirs = results[i]["loss_sum"].get<double>();
    CHECK(results[i]["num_tokens"].get<double>() == ours[i].num_tokens);
    UNSCOPED_INFO(std::setprecision(10) << "ours " << ours[i].loss_sum << " transformers " << theirs
                  << " relative difference " << std::abs(ours[i].loss_sum - theirs) / std::abs(theirs));
    CHECK(std::abs(ours[i].loss_sum - theirs) <= 1e-5 * std::abs(theirs));
  }
}

TEST_CASE("convert_checkpoint rejects bad command lines and unconvertible models with status 2") {
  const std::string tool = std::string(MACTOR_BINARY_DIR) + "/bin/convert_checkpoint";
  const fs::path root = ck::test::scratch_dir("hf-bad");
  auto status = [&](const std::string& args) {
    const int s = std::system((tool + " " + args + " > /dev/null 2>&1").c_str());
    return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  };
  CHECK(status("") == 2);
  CHECK(status("to-hf --out x") == 2);  // --load missing
  CHECK(status("to-hf --load " + root.string() + " --out " + (root / "hf").string()) == 2);  // no tracker
  CHECK(status("from-hf --hf " + root.string() + " --save x") == 2);  // no config.json
  auto c = base_config();
  c.swiglu = true;  // LayerNorm + learned positions + SwiGLU: neither family
  ck::rank_state s;
  s.common = nlohmann::json{{"args", megatron_args(c)}};
  ck::save((root / "ckpt").string(), 1, 0, 1, std::move(s));
  CHECK(status("to-hf --load " + (root / "ckpt").string() + " --out " + (root / "hf").string()) == 2);
  CHECK(status("to-hf --load " + (root / "ckpt").string() + " --ckpt-step x --out y") == 2);
  // rope_scaling Megatron cannot express: another rope_type, or llama3 with other fixed values.
  const nlohmann::json llama = {{"model_type", "llama"}, {"num_hidden_layers", 2}, {"hidden_size", 32},
                                {"intermediate_size", 48}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                                {"max_position_embeddings", 20}, {"vocab_size", 96}, {"rms_norm_eps", 1e-6},
                                {"rope_theta", 500000.0}, {"tie_word_embeddings", false}};
  const std::vector<nlohmann::json> ropes = {
      nlohmann::json{{"rope_type", "dynamic"}, {"factor", 2.0}},
      nlohmann::json{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 2.0}, {"high_freq_factor", 4.0},
                     {"original_max_position_embeddings", 8192}}};
  for (std::size_t k = 0; k < ropes.size(); ++k) {
    const auto& rope = ropes[k];
    auto config = llama;
    config["rope_scaling"] = rope;
    // (A const json's operator[] on a missing key is undefined behaviour: the folder is named by index.)
    const fs::path hf = root / ("rope-" + std::to_string(k));
    fs::create_directories(hf);
    std::ofstream(hf / "config.json") << config.dump();
    INFO(rope.dump());
    const auto r = mactor::test::run_shell(tool + " from-hf --hf " + hf.string() + " --save " + (root / "rope-out").string());
    CHECK(r.status == 2);
    CHECK(r.err.find("rope_scaling") != std::string::npos);
  }
}
