// Memory sizes: a number with an optional K, M, G or T suffix (binary units).
#include "config/memory_size.hpp"

#include <charconv>
#include <cmath>

namespace mactor::config {

std::optional<std::int64_t> parse_memory_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double scale = 1;
  switch (text.back()) {
    case 'K': case 'k': scale = 1024.0; break;
    case 'M': case 'm': scale = 1024.0 * 1024; break;
    case 'G': case 'g': scale = 1024.0 * 1024 * 1024; break;
    case 'T': case 't': scale = 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
  }
  if (scale != 1) text.remove_suffix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || !(value > 0) || !std::isfinite(value))
    return std::nullopt;
  return static_cast<std::int64_t>(std::llround(value * scale));
}

}  // namespace mactor::config
