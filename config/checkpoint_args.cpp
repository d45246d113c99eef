// Megatron's load_args_from_checkpoint (megatron/training/checkpointing.py, core_v0.15.0): which
// arguments a checkpoint provides, and which of them override the command line.
#include "config/checkpoint_args.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "config/config_json.hpp"

namespace mactor::config {
namespace {

using json = nlohmann::json;

struct checkpoint_arg {
  const char* name;
  bool force;  ///< overrides a value given on the command line
};

// In Megatron's order. Megatron's MoE, Mamba and heterogeneous arguments are in the list too;
// mactor refuses those flags before this runs, so they are left out.
constexpr checkpoint_arg model_args[] = {
    {"num_layers", false}, {"hidden_size", false}, {"ffn_hidden_size", false}, {"seq_length", false},
    {"num_attention_heads", false}, {"num_query_groups", true}, {"group_query_attention", true},
    {"kv_channels", false}, {"max_position_embeddings", false}, {"position_embedding_type", true},
    {"add_position_embedding", true}, {"use_rotary_position_embeddings", true}, {"rotary_base", true},
    {"rotary_percent", true}, {"rotary_interleaved", true}, {"add_bias_linear", true}, {"add_qkv_bias", true},
    {"squared_relu", true}, {"swiglu", true}, {"untie_embeddings_and_output_weights", true},
    {"apply_layernorm_1p", true}, {"normalization", true}, {"apply_query_key_layer_scaling", true},
    {"attention_dropout", true}, {"hidden_dropout", true}, {"tokenizer_type", true},
};
constexpr checkpoint_arg parallel_args[] = {
    {"tensor_model_parallel_size", true}, {"pipeline_model_parallel_size", true},
    {"num_layers_per_virtual_pipeline_stage", false}, {"expert_model_parallel_size", true},
};

// Python's str() of a JSON value, for Megatron's message.
std::string python_text(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

void set_arg(json& current, const json& saved, const checkpoint_arg& a, std::vector<std::string>& lines) {
  if (!current.contains(a.name)) return;
  if (!a.force && !current[a.name].is_null()) return;
  const auto it = saved.find(a.name);
  if (it == saved.end() || it->is_null()) {
    lines.push_back(std::string("Checkpoint did not provide arguments ") + a.name);
    return;
  }
  lines.push_back(std::string("Setting ") + a.name + " to " + python_text(*it) + " from checkpoint");
  current[a.name] = *it;
}

}  // namespace

std::vector<std::string> apply_checkpoint_args(megatron_args& args, const std::string& checkpoint_args_json) {
  const json saved = json::parse(checkpoint_args_json, nullptr, /*allow_exceptions=*/false);
  if (!saved.is_object()) throw std::runtime_error("the checkpoint's saved arguments are not a JSON object");
  json current = json::parse(to_json(args));
  std::vector<std::string> lines;
  for (const auto& a : model_args) set_arg(current, saved, a, lines);
  if (args.checkpointing.use_tokenizer_model_from_checkpoint_args) set_arg(current, saved, {"tokenizer_model", true}, lines);
  set_arg(current, saved, {"tiktoken_pattern", true}, lines);
  if (args.checkpointing.use_mp_args_from_checkpoint_args)
    for (const auto& a : parallel_args) set_arg(current, saved, a, lines);
  args = from_json(current.dump());
  return lines;
}

}  // namespace mactor::config
