// HuggingFaceTokenizer for tokenizer.json files of model type BPE with byte-level pre-tokenizing
// (GPT-2 style): added tokens are matched literally first, and a TemplateProcessing post-processor
// adds its special tokens, as transformers' tokenizer(text).input_ids does.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/byte_level_bpe.hpp"
#include "data/data_error.hpp"
#include "data/tokenizer.hpp"

namespace mactor::data {
namespace {
namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw data_error("--tokenizer-model=" + path + ": cannot open; give a tokenizer.json or its directory");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw data_error(path + ": not valid JSON (" + e.what() + ")");
  }
}

class huggingface_tokenizer : public tokenizer {
 public:
  huggingface_tokenizer(const std::string& path, std::optional<std::string> eos_token, bool template_tokens)
      : path_(path) {
    std::string file = fs::is_directory(path) ? (fs::path(path) / "tokenizer.json").string() : path;
    const nlohmann::json j = read_json(file);
    const auto& model = j.at("model");
    if (model.value("type", "") != "BPE")
      throw data_error(file + ": model type " + model.value("type", std::string("?")) +
                       " is not supported; only BPE tokenizer.json files are");
    check_pre_tokenizer(j["pre_tokenizer"], file);
    std::unordered_map<std::string, std::int64_t> vocab;
    for (auto& [k, v] : model.at("vocab").items()) vocab[k] = v.get<std::int64_t>();
    std::vector<std::pair<std::string, std::string>> merges;
    for (const auto& m : model.at("merges")) {
      if (m.is_array()) {
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        const auto s = m.get<std::string>();
        const auto sp = s.find(' ');
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      }
    }
    std::int64_t extra = 0;
    for (const auto& t : j.value("added_tokens", nlohmann::json::array())) {
      const auto content = t.at("content").get<std::string>();
      const auto id = t.at("id").get<std::int64_t>();
      added_.emplace_back(content, id);
      if (!vocab.count(content)) {
        vocab[content] = id;
        ++extra;
      }
    }
    std::sort(added_.begin(), added_.end(), [](auto& a, auto& b) { return a.first.size() > b.first.size(); });
    size_ = static_cast<std::int64_t>(model.at("vocab").size()) + extra;
    bpe_ = std::make_unique<byte_level_bpe>(std::move(vocab), merges, file);
    if (template_tokens) read_post_processor(j["post_processor"]);
    if (!eos_token) {
      const auto cfg = fs::path(file).parent_path() / "tokenizer_config.json";
      if (fs::exists(cfg)) {
        auto c = read_json(cfg.string());
        if (c.contains("eos_token") && c["eos_token"].is_string()) eos_token = c["eos_token"].get<std::string>();
        else if (c.contains("eos_token") && c["eos_token"].is_object()) eos_token = c["eos_token"]["content"].get<std::string>();
        if (c.contains("pad_token") && c["pad_token"].is_string()) pad_ = bpe_->id_of(c["pad_token"].get<std::string>());
      }
    }
    for (const std::string& cand : {eos_token.value_or(""), std::string("<|endoftext|>"), std::string("</s>")})
      if (!cand.empty() && bpe_->id_of(cand) >= 0) { eod_ = bpe_->id_of(cand); break; }
    if (eod_ < 0) throw data_error(file + ": cannot tell the end-of-document token; add tokenizer_config.json with eos_token");
  }

  std::vector<std::int64_t> tokenize(std::string_view text) const override {
    std::vector<std::int64_t> out = prefix_;
    std::size_t pos = 0, start = 0;
    while (pos < text.size()) {
      bool hit = false;
      for (const auto& [content, id] : added_) {
        if (!content.empty() && text.compare(pos, content.size(), content) == 0) {
          encode_text(text.substr(start, pos - start), out);
          out.push_back(id);
          pos += content.size();
          start = pos;
          hit = true;
          break;
        }
      }
      if (!hit) ++pos;
    }
    encode_text(text.substr(start), out);
    out.insert(out.end(), suffix_.begin(), suffix_.end());
    return out;
  }
  std::string detokenize(const std::vector<std::int64_t>& ids) const override { return bpe_->decode(ids); }
  std::int64_t vocab_size() const override { return size_; }
  std::int64_t eod() const override { return eod_; }
  std::optional<std::int64_t> pad() const override { return pad_; }
  nlohmann::ordered_json unique_identifiers() const override {
    nlohmann::ordered_json j;
    j["class"] = "_HuggingFaceTokenizer";
    j["tokenizer_path"] = {path_};
    return j;
  }

 private:
  void encode_text(std::string_view text, std::vector<std::int64_t>& out) const {
    if (text.empty()) return;
    if (add_prefix_space_ && text.front() != ' ') {
      std::string t = " " + std::string(text);
      bpe_->encode(t, out);
    } else {
      bpe_->encode(text, out);
    }
  }
  void check_pre_tokenizer(const nlohmann::json& p, const std::string& file) {
    auto unsupported = [&](const std::string& what) {
      return data_error(file + ": pre_tokenizer " + what +
                        " is not supported; only ByteLevel (GPT-2 pattern) tokenizer.json files are");
    };
    if (p.is_null()) throw unsupported("null");
    if (p.value("type", "") == "ByteLevel") {
      add_prefix_space_ = p.value("add_prefix_space", false);
      if (!p.value("use_regex", true)) throw unsupported("ByteLevel without use_regex");
      return;
    }
    throw unsupported(p.value("type", std::string("?")));
  }
  void read_post_processor(const nlohmann::json& p) {
    if (p.is_null() || p.value("type", "") != "TemplateProcessing") return;
    bool after = false;
    for (const auto& piece : p.at("single")) {
      if (piece.contains("Sequence")) { after = true; continue; }
      const auto name = piece.at("SpecialToken").at("id").get<std::string>();
      for (const auto& id : p.at("special_tokens").at(name).at("ids"))
        (after ? suffix_ : prefix_).push_back(id.get<std::int64_t>());
    }
  }
  std::string path_;
  std::unique_ptr<byte_level_bpe> bpe_;
  std::vector<std::pair<std::string, std::int64_t>> added_;
  std::vector<std::int64_t> prefix_, suffix_;
  bool add_prefix_space_ = false;
  std::int64_t size_ = 0, eod_ = -1;
  std::optional<std::int64_t> pad_;
};

}  // namespace

std::unique_ptr<tokenizer> make_huggingface_tokenizer(const std::string& tokenizer_json,
                                                      std::optional<std::string> eos_token, bool template_tokens) {
  return std::make_unique<huggingface_tokenizer>(tokenizer_json, std::move(eos_token), template_tokens);
}

}  // namespace mactor::data
