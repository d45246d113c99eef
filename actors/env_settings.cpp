#include "actors/env_settings.hpp"

#include <cstdlib>
#include <stdexcept>

namespace mactor::actors::settings {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

double parse_seconds(const char* name, const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(std::string(name) + "='" + text + "' is not a number of seconds (e.g. " + name + "=30)");
}

std::int64_t parse_count(const char* name, const std::string& text) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(std::string(name) + "='" + text + "' is not a non-negative integer");
}

}  // namespace mactor::actors::settings
