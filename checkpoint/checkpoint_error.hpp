// The one exception type of checkpoint/: every message names the file or tensor at fault and a fix.
#pragma once
#include <stdexcept>
#include <string>

namespace mactor::checkpoint {

/// A checkpoint that cannot be written, found, or trusted (missing, truncated or altered files,
/// a garbled tracker, a tensor slice no saved piece covers).
class checkpoint_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The advice appended to every "this checkpoint is damaged" message.
inline constexpr const char* damaged_checkpoint_fix =
    "re-save or load an older iteration with --ckpt-step";

}  // namespace mactor::checkpoint
