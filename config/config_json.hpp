// Printing the resolved configuration: JSON for --dump-config, and Megatron's `arguments` block.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

/// One JSON object keyed by Megatron's dest names, in registration order, then the derived values.
std::string to_json(const megatron_args& args, int indent = 2);

/// Reads what to_json wrote back into a megatron_args (throws std::runtime_error naming a bad key).
megatron_args from_json(const std::string& text);

/// Every attribute of Megatron's args with its value as Python's str() prints it, in attribute order
/// (what Megatron's _print_args and write_args_to_tensorboard iterate over).
std::vector<std::pair<std::string, std::string>> argument_strings(const megatron_args& args);

/// Python's str() of a list of ints, as Megatron prints one: "[]", "[4]", "[2, 9]".
std::string python_list_str(const std::vector<std::int64_t>& values);

/// Megatron's `_print_args("arguments", args)` block: every attribute as `  name ..... value`, sorted
/// case-insensitively, values printed as Python's str() prints them.
std::string arguments_block(const megatron_args& args);

}  // namespace mactor::config
