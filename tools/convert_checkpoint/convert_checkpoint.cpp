// convert_checkpoint: a mactor (Megatron torch_dist-style) checkpoint to a Hugging Face folder
// (model.safetensors + config.json: GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM,
// DeepseekV3ForCausalLM, Qwen3ForCausalLM or Qwen3MoeForCausalLM) and back.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/checkpoint_reader.hpp"
#include "checkpoint/save.hpp"
#include "tools/convert_checkpoint/hf_config.hpp"
#include "tools/convert_checkpoint/hf_mapping.hpp"
#include "tools/convert_checkpoint/safetensors.hpp"

namespace ck = mactor::checkpoint;
namespace cv = mactor::convert;
namespace fs = std::filesystem;

namespace {

constexpr const char* usage =
    "usage: convert_checkpoint to-hf --load DIR [--ckpt-step N] --out HF_DIR\n"
    "       convert_checkpoint from-hf --hf HF_DIR --save DIR [--iteration N] [--moe-grouped-gemm]\n"
    "to-hf reads the model from the common document's \"args\" (GPT-2 style: LayerNorm, learned\n"
    "positions, GeLU -> GPT2LMHeadModel; Llama style: RMSNorm, rope, SwiGLU -> LlamaForCausalLM, or\n"
    "with every layer MoE (softmax top-k routing) -> MixtralForCausalLM; multi-latent attention\n"
    "(dense or MoE, RoPE or YaRN) -> DeepseekV3ForCausalLM; --qk-layernorm -> Qwen3ForCausalLM, or\n"
    "with MoE -> Qwen3MoeForCausalLM) and writes\n"
    "model.safetensors + config.json with vocab_size = padded_vocab_size.\n"
    "from-hf writes a 1-rank checkpoint of the model weights (no optimizer state) for --finetune;\n"
    "--moe-grouped-gemm names the experts as --moe-grouped-gemm does (linear_fc1.weight<e>).\n";

struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::map<std::string, std::string> parse_flags(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--moe-grouped-gemm") {  // the one switch without a value
      flags[key] = "true";
      --i;
      continue;
    }
    if (key.rfind("--", 0) != 0 || i + 1 >= argc)
      throw usage_error("expected --flag VALUE pairs after the command, got \"" + key + "\"");
    flags[key] = argv[i + 1];
  }
  return flags;
}

std::string take(std::map<std::string, std::string>& flags, const std::string& key, bool required) {
  auto it = flags.find(key);
  if (it == flags.end()) {
    if (required) throw usage_error(key + " is required");
    return {};
  }
  std::string v = it->second;
  flags.erase(it);
  return v;
}

std::int64_t to_int(const std::string& flag, const std::string& v) {
  try {
    std::size_t used = 0;
    const auto n = std::stoll(v, &used);
    if (used == v.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw usage_error(flag + " " + v + " is not a non-negative integer");
}

void reject_unknown(const std::map<std::string, std::string>& flags) {
  if (!flags.empty()) throw usage_error("unknown flag " + flags.begin()->first);
}

const char* architecture(cv::hf_family f) {
  switch (f) {
    case cv::hf_family::gpt2: return "GPT2LMHeadModel";
    case cv::hf_family::llama: return "LlamaForCausalLM";
    case cv::hf_family::mixtral: return "MixtralForCausalLM";
    case cv::hf_family::deepseek_v3: return "DeepseekV3ForCausalLM";
    case cv::hf_family::qwen3: return "Qwen3ForCausalLM";
    case cv::hf_family::qwen3_moe: return "Qwen3MoeForCausalLM";
  }
  return "?";
}

int to_hf(std::map<std::string, std::string> flags) {
  const std::string load = take(flags, "--load", true), out = take(flags, "--out", true);
  const std::string step = take(flags, "--ckpt-step", false);
  reject_unknown(flags);
  std::optional<std::int64_t> iteration;
  if (!step.empty()) iteration = to_int("--ckpt-step", step);
  ck::checkpoint_reader reader(load, iteration);
  if (!reader.common().contains("args") || !reader.common()["args"].is_object())
    throw std::invalid_argument("the checkpoint's common.json in " + reader.directory().string() +
                                " has no \"args\" object; it was not saved by mactor's trainer");
  const cv::model_args args = cv::args_from_megatron(reader.common()["args"]);
  cv::tensor_map megatron;
  for (const auto& [name, shape] : cv::megatron_parameters(args)) {
    if (reader.has(name) && reader.global_shape(name) != shape)
      throw std::invalid_argument("checkpoint tensor " + name +
                                  " does not have the shape its common args imply");
    megatron[name] = {shape, reader.read_whole(name)};
  }
  const cv::tensor_map hf = cv::megatron_to_hf(args, megatron);
  fs::create_directories(out);
  cv::write_safetensors((fs::path(out) / "model.safetensors").string(), hf);
  std::ofstream(fs::path(out) / "config.json") << cv::hf_config_json(args).dump(2) << "\n";
  std::cout << "converted iteration " << reader.iteration() << " ("
            << architecture(args.family) << ", "
            << hf.size() << " tensors) to " << out << "\n";
  return 0;
}

cv::tensor_map read_hf_weights(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors"))
    return cv::read_safetensors((dir / "model.safetensors").string());
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index))
    throw std::invalid_argument(dir.string() + " has neither model.safetensors nor " +
                                "model.safetensors.index.json; check --hf");
  std::ifstream in(index);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map"))
    throw std::invalid_argument(index.string() + " is not a safetensors index (no weight_map)");
  std::map<std::string, bool> files;
  for (const auto& [name, file] : j["weight_map"].items()) files[file.get<std::string>()] = true;
  cv::tensor_map all;
  for (const auto& [file, unused] : files) all.merge(cv::read_safetensors((dir / file).string()));
  return all;
}

int from_hf(std::map<std::string, std::string> flags) {
  const fs::path hf_dir = take(flags, "--hf", true);
  const std::string save = take(flags, "--save", true), it = take(flags, "--iteration", false);
  const bool grouped_gemm = !take(flags, "--moe-grouped-gemm", false).empty();
  reject_unknown(flags);
  const std::int64_t iteration = it.empty() ? 0 : to_int("--iteration", it);
  std::ifstream config_in(hf_dir / "config.json");
  if (!config_in) throw std::invalid_argument((hf_dir / "config.json").string() + " is missing; check --hf");
  const auto config = nlohmann::json::parse(config_in, nullptr, false);
  if (config.is_discarded())
    throw std::invalid_argument((hf_dir / "config.json").string() + " is not valid JSON");
  cv::model_args args = cv::args_from_hf_config(config);
  if (grouped_gemm && args.num_experts == 0)
    throw usage_error("--moe-grouped-gemm is for a MoE folder (model_type mixtral, qwen3_moe, or deepseek_v3 with MoE layers)");
  args.moe_grouped_gemm = grouped_gemm;
  const cv::tensor_map megatron = cv::hf_to_megatron(args, read_hf_weights(hf_dir));
  ck::rank_state state;
  for (const auto& [name, t] : megatron) state.pieces.push_back(ck::whole_tensor(name, t.shape, t.data));
  state.common = nlohmann::json{{"iteration", iteration},
                                {"args", cv::megatron_args_json(args)},
                                {"converted_from", fs::absolute(hf_dir).string()}};
  ck::save(save, iteration, 0, 1, std::move(state));
  std::cout << "saved " << megatron.size() << " tensors of " << hf_dir.string() << " as iteration "
            << iteration << " under " << save << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "-h" || command == "--help") {
    std::cout << usage;
    return 0;
  }
  try {
    if (command == "to-hf") return to_hf(parse_flags(argc, argv));
    if (command == "from-hf") return from_hf(parse_flags(argc, argv));
    throw usage_error(command.empty() ? "a command is required" : "unknown command \"" + command + "\"");
  } catch (const usage_error& e) {
    std::cerr << "error: " << e.what() << "\n" << usage;
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const ck::checkpoint_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
