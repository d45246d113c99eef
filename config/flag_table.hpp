// The table of Megatron-LM core_v0.15.0 flags (generated from config/megatron_flags.tsv) and lookups.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mactor::config {

/// How a flag's text becomes a value; mirrors the argparse `type`/`action` Megatron registers.
enum class value_kind {
  int_value, float_value, string_value,
  python_bool,       // type=bool: any non-empty string is True, as in Python
  store_true, store_false,
  boolean_optional,  // argparse.BooleanOptionalAction: --x / --no-x
  tuple_value,       // tuple_type: "1,2" or "(1,2)"
  freq_value,        // moe_freq_type / no_rope_freq_type: an int or a list expression
};

enum class nargs_kind { one, one_or_more, any };
enum class deprecation { none, soon, removed };

/// One Megatron argument group (`_add_*_args`), in the order Megatron calls them.
struct flag_group {
  std::string name;      // e.g. "network_size": also the field name in megatron_args
  std::string function;  // e.g. "_add_network_size_args"
};

/// One argparse action of Megatron's parser.
struct flag_spec {
  std::vector<std::string> options;  // every option string, first is the canonical one
  std::string dest;
  int group = 0;  // index into flag_groups()
  value_kind kind = value_kind::string_value;
  nargs_kind nargs = nargs_kind::one;
  std::vector<std::string> choices;  // as Python prints them (str of each choice)
  std::string default_repr;          // Python repr of Megatron's default
  deprecation deprecated = deprecation::none;
  std::string notes;

  [[nodiscard]] bool takes_value() const {
    return kind != value_kind::store_true && kind != value_kind::store_false &&
           kind != value_kind::boolean_optional;
  }
};

const std::vector<flag_group>& flag_groups();
const std::vector<flag_spec>& flag_specs();

/// The spec whose option strings include `option` (e.g. "--no-x" finds --x's spec), or nullptr.
const flag_spec* find_flag(std::string_view option);
/// The first spec registered for `dest`, or nullptr.
const flag_spec* find_dest(std::string_view dest);

}  // namespace mactor::config
