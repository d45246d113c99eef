// The one exception type the data layer throws: bad or foreign files, bad flags for data, bad
// tokenizer inputs. The message names the file (and byte offset or line) and what to do about it.
#pragma once
#include <stdexcept>
#include <string>

namespace mactor::data {

/// Thrown for user-facing data problems (truncated or foreign files, malformed input, bad splits).
class data_error : public std::runtime_error {
 public:
  explicit data_error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace mactor::data
