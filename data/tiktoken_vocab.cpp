// Reads Megatron's tiktoken JSON vocabulary with reload_mergeable_ranks' checks.
#include "data/tiktoken_vocab.hpp"

#include <fstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "data/data_error.hpp"

namespace mactor::data {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

nlohmann::json parse_file(const std::string& path) {
  const std::string fix = "; give Megatron's tiktoken vocabulary JSON (a list of {\"rank\", \"token_bytes\", "
                          "\"token_str\"}) with --tokenizer-model";
  if (path.size() < 5 || path.compare(path.size() - 5, 5, ".json") != 0)
    throw data_error("--tokenizer-model=" + path + ": TikTokenizer reads only .json vocabularies" + fix);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw data_error("--tokenizer-model=" + path + ": cannot open" + fix);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw data_error(path + ": not valid JSON (" + e.what() + ")" + fix);
  }
}

std::string entry_bytes(const nlohmann::json& x, std::size_t i, const std::string& path) {
  const auto where = path + ": entry " + std::to_string(i);
  if (!x.is_object() || x.size() != 3 || !x.contains("rank") || !x.contains("token_bytes") || !x.contains("token_str"))
    throw data_error(where + " must have exactly the keys rank, token_bytes and token_str");
  if (!x["rank"].is_number_integer() || x["rank"].get<std::int64_t>() != static_cast<std::int64_t>(i))
    throw data_error(where + " has rank " + x["rank"].dump() + "; entry i must have rank i");
  auto bytes = x["token_bytes"].is_string() ? base64_decode(x["token_bytes"].get<std::string>()) : std::nullopt;
  if (!bytes) throw data_error(where + ": token_bytes is not base64");
  if (i < 256 && *bytes != std::string(1, static_cast<char>(i)))
    throw data_error(where + ": the first 256 entries must be the single bytes 0..255 in order");
  return *bytes;
}

}  // namespace

std::optional<std::string> base64_decode(const std::string& s) {
  if (s.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s[i + static_cast<std::size_t>(k)];
      if (c == '=' && i + 4 == s.size() && k >= 2) { v[k] = 0; ++pad; continue; }
      if (pad || (v[k] = base64_value(c)) < 0) return std::nullopt;
    }
    const std::uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>(n >> 16);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

std::vector<std::string> read_tiktoken_vocab(const std::string& path, std::optional<std::int64_t> max_vocab) {
  const nlohmann::json j = parse_file(path);
  if (!j.is_array()) throw data_error(path + ": a TikTokenizer vocabulary is a JSON list of entries");
  std::size_t n = j.size();
  if (max_vocab && *max_vocab >= 0) n = std::min(n, static_cast<std::size_t>(*max_vocab));
  std::vector<std::string> tokens;
  tokens.reserve(n);
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < n; ++i) {
    tokens.push_back(entry_bytes(j[i], i, path));
    if (!seen.insert(tokens.back()).second)
      throw data_error(path + ": entry " + std::to_string(i) + " repeats the bytes of an earlier entry");
  }
  return tokens;
}

}  // namespace mactor::data
