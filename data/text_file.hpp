// A small text file a flag names (a vocabulary, merges, a data-arguments list), read whole.
#pragma once
#include <string>
#include <string_view>

namespace mactor::data {

/// The file's bytes. Throws data_error naming `flag` and `path` when it cannot be opened.
std::string read_text_file(const std::string& path, std::string_view flag);

}  // namespace mactor::data
