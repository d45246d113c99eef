// --data-args-path and --per-split-data-args-path: the --data-path words (or the per-split ones)
// read from a file when the list is too long for a command line (Megatron's
// get_blend_and_blend_per_split).
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace mactor::data {

/// The whitespace-separated words of a --data-args-path file, as Python's str.split() gives
/// them. Throws data_error naming the file when it cannot be read or holds no word.
std::vector<std::string> data_args_file_words(const std::string& path);

/// A --per-split-data-args-path JSON file: an object with "train", "valid" and "test", each a
/// string of words, a list of words (numbers allowed as weights) or null (no dataset for that
/// split). Throws data_error naming the file and the key for anything else.
std::array<std::optional<std::vector<std::string>>, 3> per_split_data_args_file(const std::string& path);

}  // namespace mactor::data
