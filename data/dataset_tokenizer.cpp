// megatron.core.tokenizers' build_tokenizer (core_v0.15) for the dataset: each --tokenizer-type
// has a library and a tokenizer path (and keyword arguments, which the unique identifiers list);
// --tokenizer-metadata may name another library and a model class. Loading a library other than
// the type's own fails in Megatron for every type but the SentencePiece ones with byte-level
// (they pass no keyword arguments), so that is the one other library built here.
#include "data/dataset_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <utility>

#include "data/data_error.hpp"

namespace mactor::data {
namespace {

constexpr std::array<std::pair<const char*, const char*>, 6> model_classes = {{
    {"default", "default_tokenizer.DefaultTokenizerText"},
    {"gpt", "gpt_tokenizer.GPTTokenizer"},
    {"mamba", "mamba_tokenizer.MambaTokenizer"},
    {"bert", "bert_tokenizer.BertTokenizer"},
    {"t5", "t5_tokenizer.T5Tokenizer"},
    {"retro", "retro_tokenizer.RetroTokenizer"},
}};
constexpr std::array<const char*, 6> libraries = {"sentencepiece", "huggingface", "megatron",
                                                  "tiktoken",      "byte-level",  "null"};

std::string class_path(const std::string& model_type) {
  for (const auto& [name, cls] : model_classes)
    if (model_type == name) return std::string("megatron.core.tokenizers.text.models.") + cls;
  return {};
}

bool is_sentencepiece_type(const std::string& t) {
  return t == "GPTSentencePieceTokenizer" || t == "Llama2Tokenizer" || t == "SentencePieceTokenizer";
}

// The library build_tokenizer picks for a type without metadata.
std::string library_of_type(const std::string& t) {
  if (t == "GPT2BPETokenizer") return "megatron";
  if (is_sentencepiece_type(t)) return "sentencepiece";
  if (t == "TikTokenizer") return "tiktoken";
  if (t == "HuggingFaceTokenizer") return "huggingface";
  return "null";
}

std::string py_str(const std::optional<std::string>& v) { return v ? *v : "None"; }

// MegatronTokenizerText.unique_identifiers: class, path, then the keyword arguments in the order
// build_tokenizer adds them, each as str().
nlohmann::ordered_json identifiers_of(const tokenizer_options& o, const tokenizer& legacy, const std::string& cls) {
  nlohmann::ordered_json j;
  if (o.tokenizer_type == "TikTokenizer") {  // the tokenizer already is the library's (see tiktoken_tokenizer.cpp)
    j = legacy.unique_identifiers();
    j["class"] = cls;
    return j;
  }
  j["class"] = cls;
  if (o.tokenizer_type == "GPT2BPETokenizer") {
    j["tokenizer_path"] = o.tokenizer_type;
    j["vocab_file"] = py_str(o.vocab_file);
    j["merges_file"] = py_str(o.merge_file);
  } else if (o.tokenizer_type == "HuggingFaceTokenizer") {
    j["tokenizer_path"] = py_str(o.tokenizer_model);
    j["vocab_file"] = py_str(o.vocab_file);
    j["merges_file"] = py_str(o.merge_file);
  } else {
    j["tokenizer_path"] = py_str(o.tokenizer_model);
  }
  return j;
}

}  // namespace

tokenizer_metadata read_tokenizer_metadata(const std::string& path) {
  const std::string where = "--tokenizer-metadata " + path + ": ";
  if (!std::filesystem::is_regular_file(path))
    throw data_error(where + "no such file (Megatron's MegatronTokenizer asserts it exists); write one with "
                             "MegatronTokenizer.write_metadata(), e.g. {\"library\": \"sentencepiece\"}, or leave out the flag");
  std::ifstream in(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw data_error(where + "not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw data_error(where + "must hold a JSON object such as {\"library\": \"sentencepiece\"}");
  if (j.contains("tokenizer_class") && !j["tokenizer_class"].is_null() && j["tokenizer_class"] != false)
    throw data_error(where + "names a custom Python tokenizer class (tokenizer_class), which mactor cannot run; "
                             "remove the key to use the library's own tokenizer");
  tokenizer_metadata m;
  const auto library = j.find("library");
  if (library == j.end() || !library->is_string())
    throw data_error(where + "has no \"library\"; name one of sentencepiece, huggingface, megatron, tiktoken, byte-level, null");
  m.library = library->get<std::string>();
  if (std::find(libraries.begin(), libraries.end(), m.library) == libraries.end())
    throw data_error(where + "library '" + m.library +
                     "' is not one of megatron.core.tokenizers' (sentencepiece, huggingface, megatron, tiktoken, byte-level, null)");
  if (const auto t = j.find("model_type"); t != j.end()) {
    if (!t->is_string() || class_path(t->get<std::string>()).empty())
      throw data_error(where + "model_type " + t->dump() + " is not one of default, gpt, mamba, bert, t5, retro");
    m.model_type = t->get<std::string>();
  }
  return m;
}

namespace {

// The library and model class the default path uses for `o`, refused where Megatron's
// build_tokenizer fails to load it.
tokenizer_metadata resolved_metadata(const tokenizer_options& o) {
  const std::string own = library_of_type(o.tokenizer_type);
  // NullTokenizer returns before the metadata is read.
  if (!o.tokenizer_metadata || o.tokenizer_type == "NullTokenizer") return {own, "default"};
  const auto m = read_tokenizer_metadata(*o.tokenizer_metadata);
  if (m.library == own || (m.library == "byte-level" && is_sentencepiece_type(o.tokenizer_type))) return m;
  throw data_error("--tokenizer-metadata " + *o.tokenizer_metadata + ": library '" + m.library +
                   "' cannot load --tokenizer-type " + o.tokenizer_type +
                   "'s tokenizer (megatron.core.tokenizers' build_tokenizer fails on it too: it passes that type's "
                   "path and arguments to the library); name library '" + own + "' or leave out the flag");
}

}  // namespace

dataset_tokenizer make_dataset_tokenizer(const tokenizer_options& o, const tokenizer& legacy) {
  dataset_tokenizer d;
  d.eod = legacy.eod();
  d.pad = legacy.pad();
  if (o.legacy_tokenizer) {
    d.identifiers = legacy.unique_identifiers();
    return d;
  }
  const auto m = resolved_metadata(o);
  if (o.tokenizer_type == "NullTokenizer") {
    d.identifiers = legacy.unique_identifiers();
    d.identifiers["class"] = class_path("default");
    d.identifiers["tokenizer_path"] = nullptr;
    return d;
  }
  d.identifiers = identifiers_of(o, legacy, class_path(m.model_type));
  if (m.library == "byte-level") {
    const auto bytes = make_byte_level_tokenizer();
    d.eod = bytes->eod();
    d.pad = bytes->pad();
  }
  return d;
}

std::unique_ptr<tokenizer> make_library_tokenizer(const tokenizer_options& o) {
  if (!o.legacy_tokenizer && resolved_metadata(o).library == "byte-level") return make_byte_level_tokenizer();
  return make_tokenizer(o);
}

}  // namespace mactor::data
