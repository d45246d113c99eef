// An unpickler for what torch.save writes (protocols 2 to 4): containers, numbers, strings,
// tensors rebuilt from the archive's storages, argparse.Namespace; anything else (numpy arrays in
// Megatron's RNG state, ...) comes back as an opaque object instead of failing.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "checkpoint/pickle_value.hpp"

namespace mactor::checkpoint {

/// Resolves a persistent id (torch: ('storage', <storage class>, key, location, numel)) to a
/// storage: a kind::tensor value holding the whole 1-d storage.
using persistent_loader = std::function<pickle_value(const pickle_value& pid)>;

/// Throws checkpoint_error naming `where` on an unknown opcode or a malformed stream.
pickle_value unpickle(std::string_view bytes, const persistent_loader& load, const std::string& where);

}  // namespace mactor::checkpoint
