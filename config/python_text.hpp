// Python's text conventions where Megatron's behaviour depends on them: int()/float() parsing and repr().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mactor::config {

/// Python's int(text): surrounding whitespace, a sign, and single underscores between digits allowed.
std::optional<std::int64_t> parse_python_int(std::string_view text);
/// Python's float(text): also accepts inf, infinity and nan in any case.
std::optional<double> parse_python_float(std::string_view text);
/// Python's repr(float): shortest round-trip digits, scientific below 1e-4 and from 1e16 (e.g. 1e-05, 0.0001, 3.0).
std::string python_float_repr(double value);
/// Python's repr(str) for the simple strings of a command line: single quotes unless the text has one.
std::string python_str_repr(std::string_view text);

}  // namespace mactor::config
