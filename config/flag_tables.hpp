// The flag tables behind --flag-status, and the combinations of implemented flags that are not
// built yet: shared by flag_status.cpp's lookups and checks (internal to config/).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config::detail {

/// Flags whose Megatron meaning mactor has, each with what mactor does ("" = as in Megatron-LM).
const std::map<std::string_view, std::string_view>& implemented_flags();
/// Flags accepted without effect (performance-only or hardware-specific), each with the reason.
const std::map<std::string_view, std::string_view>& accepted_flags();
/// Flags refused with a reason more specific than "not built yet".
const std::map<std::string_view, std::string_view>& refused_flags();

// Implemented flags some of whose values are not built yet: (dest, flag, the values that work).
struct value_limit {
  std::string_view dest, flag;
  std::vector<std::string_view> supported;
};
const std::vector<value_limit>& value_limits();

/// Each check appends an error for a combination of implemented flags mactor does not build yet.
void moe_combinations(const megatron_args& a, std::vector<std::string>& errors);
void mla_combinations(const megatron_args& a, std::vector<std::string>& errors);
void mtp_combinations(const megatron_args& a, std::vector<std::string>& errors);
void fp8_param_gather_combinations(const megatron_args& a, std::vector<std::string>& errors);
void fsdp_combinations(const megatron_args& a, std::vector<std::string>& errors);

}  // namespace mactor::config::detail
