// Memory sizes as mactor --device-memory (MACTOR_DEVICE_MEMORY) takes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mactor::config {

/// "512M", "2G", "1.5G", "4096K", "1T" or plain bytes, in binary units; nullopt unless a
/// positive finite size.
std::optional<std::int64_t> parse_memory_size(std::string_view text);

}  // namespace mactor::config
