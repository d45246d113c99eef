// The support status of every Megatron flag in mactor: the one table users read with --flag-status.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/megatron_args.hpp"

namespace mactor::config {

enum class support {
  implemented,              // has its Megatron meaning here
  accepted_without_effect,  // performance-only or hardware-specific; results are the same without it
  not_implemented,          // setting it to a non-default value is an error
};

struct flag_support {
  support status = support::not_implemented;
  std::string_view reason;
};

/// The status of the flag whose argparse dest is `dest`.
flag_support support_of(std::string_view dest);
std::string_view support_name(support s);

/// The --flag-status table: one line per flag (flag, group, status, reason), tab-separated, with a header.
std::string flag_status_table();

struct support_report {
  std::vector<std::string> errors;    // "--foo is recognized but not implemented by mactor yet"
  std::vector<std::string> warnings;  // one line per accepted-without-effect flag that was set
};

/// Which flags a program holds to this table, by dest. pretrain_gpt trains with every flag it is
/// given, so it holds them all; a tool that reads only part of the config (mactor schedule) holds
/// only the flags that part depends on, and a script's other flags need only pass validation.
using support_scope = std::function<bool(std::string_view dest)>;
inline bool every_flag(std::string_view) { return true; }
/// A tool whose every flag is modelled whatever mactor's training builds (mactor schedule).
inline bool no_flag(std::string_view) { return false; }

/// Compares `args` with Megatron's defaults and reports every flag in `scope` set to a non-default
/// value whose status is not `implemented`.
support_report check_support(const megatron_args& args, const support_scope& scope = every_flag);

}  // namespace mactor::config
