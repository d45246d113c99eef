// A small evaluator for the Python list expressions Megatron accepts in `--moe-layer-freq "([1]*3+[0]*1)*3"`.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

namespace mactor::config {

using int_or_list_value = std::variant<std::int64_t, std::vector<std::int64_t>>;

/// Evaluates integers, list literals, `+`, `*` and parentheses with Python's meaning
/// (list + list concatenates, list * n repeats). Like Megatron's `_eval_pattern`, only the
/// characters `0-9 , [ ] ( ) + *` are allowed. Returns nullopt on anything Python would reject
/// or that is not an int or a flat list of ints.
std::optional<int_or_list_value> evaluate_list_expression(std::string_view text);

}  // namespace mactor::config
