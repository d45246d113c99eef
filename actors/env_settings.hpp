// Reading mactor's own settings from the environment (MACTOR_INSPECT, MACTOR_STALL_THRESHOLD,
// the test hooks): Megatron has no flags for them. Bad values throw std::invalid_argument
// naming the variable; the job turns that into exit status 2.
#pragma once

#include <cstdint>
#include <string>

namespace mactor::actors::settings {

/// The variable's value, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback = "");
/// A non-negative number of seconds.
double parse_seconds(const char* name, const std::string& text);
/// A non-negative integer.
std::int64_t parse_count(const char* name, const std::string& text);

}  // namespace mactor::actors::settings
