// Entry point of validation: runs the rule groups in Megatron's order over one report.
#include "config/validate.hpp"

#include "config/validation_context.hpp"

namespace mactor::config {

validation_report validate(megatron_args& args, const process_placement& placement) {
  validation_report report;
  detail::validation_context c{args, report, placement};
  detail::validate_parallel_layout(c);
  detail::validate_training_args(c);
  detail::validate_transformer_config(c);
  detail::validate_runtime(c);
  detail::validate_pipeline_schedule(c);
  return report;
}

std::int64_t replica_size(const megatron_args& args) {
  const auto& d = args.distributed;
  return d.tensor_model_parallel_size * d.pipeline_model_parallel_size * d.context_parallel_size;
}

std::int64_t padded_vocab_size(std::int64_t vocab_size, const megatron_args& args) {
  const std::int64_t multiple =
      args.network_size.make_vocab_size_divisible_by * args.distributed.tensor_model_parallel_size;
  if (multiple <= 0) return vocab_size;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

std::string divisors_text(std::int64_t n) {
  std::vector<std::int64_t> ds;
  for (std::int64_t d = 1; d <= n && d <= 1000000 && ds.size() < 24; ++d)
    if (n % d == 0) ds.push_back(d);
  std::string out;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    if (i > 0) out += i + 1 == ds.size() ? " or " : ", ";
    out += std::to_string(ds[i]);
  }
  return out.empty() ? "none" : out;
}

}  // namespace mactor::config
