// Megatron's TikTokenizer vocabulary file (reload_mergeable_ranks in core_v0.15.0): a JSON list
// whose i-th entry is {"rank": i, "token_bytes": base64, "token_str": text}; ranks 0..255 are the
// single bytes 0..255 in order. Only .json files are read, as in Megatron.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mactor::data {

/// The tokens' bytes in rank order, cut to the first `max_vocab` entries when given. Throws
/// data_error naming the file and the entry for any departure from Megatron's assertions.
std::vector<std::string> read_tiktoken_vocab(const std::string& path, std::optional<std::int64_t> max_vocab);

/// Standard base64 (with padding) to bytes; nullopt when malformed.
std::optional<std::string> base64_decode(const std::string& s);

}  // namespace mactor::data
