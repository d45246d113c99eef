// The flag support lookups and checks behind --flag-status; the tables are in flag_table_*.cpp and the
// refused combinations in flag_combinations.cpp.
#include "config/flag_status.hpp"

#include <map>
#include <optional>
#include <type_traits>
#include <sstream>

#include "config/flag_table.hpp"
#include "config/flag_tables.hpp"

namespace mactor::config {
namespace {

using namespace detail;

// The value's words: one, or each of an nargs='+' list (every one must be supported).
template <class T>
std::optional<std::vector<std::string>> as_texts(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) return std::vector<std::string>{v};
  else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    if (!v) return std::nullopt;
    return std::vector<std::string>{*v};
  } else if constexpr (std::is_same_v<T, one_or_many<std::string>>) {
    if (const auto* one = std::get_if<std::string>(&v)) return std::vector<std::string>{*one};
    return std::get<std::vector<std::string>>(v);
  }
  else return std::nullopt;
}

}  // namespace

flag_support support_of(std::string_view dest) {
  if (auto it = implemented_flags().find(dest); it != implemented_flags().end())
    return {support::implemented, it->second.empty() ? std::string_view("as in Megatron-LM") : it->second};
  if (auto it = accepted_flags().find(dest); it != accepted_flags().end()) return {support::accepted_without_effect, it->second};
  if (auto it = refused_flags().find(dest); it != refused_flags().end()) return {support::not_implemented, it->second};
  return {support::not_implemented, "not built yet"};
}

std::string_view support_name(support s) {
  switch (s) {
    case support::implemented: return "implemented";
    case support::accepted_without_effect: return "accepted without effect";
    default: return "not implemented yet";
  }
}

std::string flag_status_table() {
  std::ostringstream out;
  out << "flag\tgroup\tstatus\treason\n";
  for (const auto& s : flag_specs()) {
    const auto st = support_of(s.dest);
    std::string names;
    for (const auto& o : s.options) names += (names.empty() ? "" : "|") + o;
    out << names << '\t' << flag_groups()[static_cast<std::size_t>(s.group)].name << '\t' << support_name(st.status) << '\t'
        << st.reason << '\n';
  }
  return out.str();
}

support_report check_support(const megatron_args& args, const support_scope& scope) {
  support_report report;
  const megatron_args defaults;
  for_each_flag_field(
      [&](std::string_view dest, const auto& value, const auto& default_value) {
        if (value == default_value || !scope(dest)) return;
        const auto st = support_of(dest);
        const auto* spec = find_dest(dest);
        const std::string flag = spec ? spec->options.front() : std::string(dest);
        if (st.status == support::implemented) {
          for (const auto& limit : value_limits()) {
            if (limit.dest != dest) continue;
            const auto texts = as_texts(value);
            if (!texts) continue;
            for (const auto& text : *texts) {
              bool ok = false;
              for (auto v : limit.supported) ok = ok || v == text;
              if (ok) continue;
              std::string list;
              for (auto v : limit.supported) list += (list.empty() ? "" : ", ") + std::string(v);
              report.errors.push_back(std::string(limit.flag) + " " + text +
                                      " is recognized but not implemented by mactor yet (implemented: " + list + ")");
            }
          }
        } else if (st.status == support::not_implemented) {
          const auto refused = refused_flags().find(dest);
          report.errors.push_back(flag + " is recognized but not implemented by mactor yet" +
                                  (refused == refused_flags().end() ? "" : ": " + std::string(refused->second)));
        }
        else if (st.status == support::accepted_without_effect)
          report.warnings.push_back("WARNING: " + flag + " is accepted without effect: " + std::string(st.reason));
      },
      static_cast<const flag_args&>(args), static_cast<const flag_args&>(defaults));
  if (scope("num_experts")) moe_combinations(args, report.errors);
  if (scope("multi_latent_attention")) mla_combinations(args, report.errors);
  if (scope("mtp_num_layers")) mtp_combinations(args, report.errors);
  if (scope("fp8_param_gather")) fp8_param_gather_combinations(args, report.errors);
  if (scope("use_megatron_fsdp") || scope("use_torch_fsdp2")) fsdp_combinations(args, report.errors);
  // Implemented flags in a combination mactor has not built: its torch format writes neither the
  // distributed optimizer's distrib_optim.pt nor expert-parallel files.
  // Megatron raises NotImplementedError at the first non-persistent save without a type.
  if (scope("non_persistent_save_interval") && args.checkpointing.non_persistent_save_interval &&
      !args.checkpointing.non_persistent_ckpt_type)
    report.errors.push_back("--non-persistent-save-interval needs --non-persistent-ckpt-type global or local (Megatron fails at "
                            "the first non-persistent save without a type)");
  if (scope("ckpt_format") && args.checkpointing.ckpt_format == "torch") {
    // Megatron's distrib_optim.pt holds Adam's param, exp_avg and exp_avg_sq: its save fails with SGD.
    if (args.distributed.use_distributed_optimizer && args.training.optimizer != "adam")
      report.errors.push_back("--ckpt-format torch with --use-distributed-optimizer saves Adam's state only "
                              "(distrib_optim.pt holds param, exp_avg and exp_avg_sq), not --optimizer " +
                              args.training.optimizer + "; use --ckpt-format torch_dist");
    if (args.moe.expert_model_parallel_size > 1)
      report.errors.push_back("--ckpt-format torch with --expert-model-parallel-size > 1 is recognized but not implemented "
                              "by mactor yet; use --ckpt-format torch_dist");
    if (args.moe.moe_router_enable_expert_bias)
      report.errors.push_back("--ckpt-format torch with --moe-router-enable-expert-bias is recognized but not implemented "
                              "by mactor yet (the routers' expert_bias buffers); use --ckpt-format torch_dist");
  }
  return report;
}

}  // namespace mactor::config
