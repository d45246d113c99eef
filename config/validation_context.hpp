// Internal to config/: the shared state of one validation pass and small message helpers.
#pragma once

#include <sstream>
#include <string>

#include "config/validate.hpp"

namespace mactor::config::detail {

/// Formats values as they appear in messages: "--tensor-model-parallel-size=3".
template <class T>
std::string show(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

struct validation_context {
  megatron_args& a;
  validation_report& report;
  process_placement placement;

  void error(std::string message) { report.errors.push_back(std::move(message)); }
  void warn(std::string message) { report.warnings.push_back("WARNING: " + std::move(message)); }
  void notice(std::string message) { report.notices.push_back(std::move(message)); }
  /// Records `message` when `ok` is false; returns ok.
  bool require(bool ok, const std::string& message) {
    if (!ok) error(message);
    return ok;
  }
};

/// Rule 85: the query groups, the heads without --group-query-attention.
inline std::int64_t effective_query_groups(const megatron_args& a) {
  return a.network_size.group_query_attention ? a.network_size.num_query_groups : a.network_size.num_attention_heads.value_or(1);
}

/// --cp-comm-type against the layers and the query groups (TransformerConfig's and Transformer
/// Engine's rules; validate_parallel.cpp).
void context_parallel_attention_rules(validation_context& c);

/// Rules 27 and 32: both FSDP flavours need more than one CUDA connection.
void require_fsdp_cuda_connections(validation_context& c);

// The rule groups, in the order Megatron applies them.
void validate_parallel_layout(validation_context& c);   // validate_args: world size, dp, batch, vp, overlap
void validate_training_args(validation_context& c);     // validate_args: precision, length, model shape, features
void validate_transformer_config(validation_context& c); // TransformerConfig / ModelParallelConfig __post_init__
void validate_runtime(validation_context& c);           // microbatches, schedules, LR scheduler
void validate_pipeline_schedule(validation_context& c); // mactor's --pipeline-schedule against the layout

}  // namespace mactor::config::detail
