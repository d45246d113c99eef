// Megatron's ConstantNumMicroBatchesCalculator and RampupBatchsizeNumMicroBatchesCalculator, as plain arithmetic.
#include "config/microbatches.hpp"

#include "config/python_text.hpp"

namespace mactor::config {

std::int64_t microbatch_plan::current_global_batch_size(std::int64_t consumed_samples) const {
  if (!rampup || consumed_samples > rampup->samples) return global_batch_size;
  const std::int64_t steps = (global_batch_size - rampup->start) / rampup->increment;
  const double samples_per_increment = static_cast<double>(rampup->samples) / static_cast<double>(steps);
  const auto increments = static_cast<std::int64_t>(static_cast<double>(consumed_samples) / samples_per_increment);
  return rampup->start + increments * rampup->increment;
}

std::int64_t microbatch_plan::running_global_batch_size(std::int64_t consumed_samples) const {
  const std::int64_t gbs = current_global_batch_size(consumed_samples);
  const std::int64_t unit = micro_batch_size * data_parallel_size;
  return decrease_batch_size_if_needed ? gbs / unit * unit : gbs;
}

std::int64_t microbatch_plan::num_microbatches(std::int64_t consumed_samples) const {
  return running_global_batch_size(consumed_samples) / (micro_batch_size * data_parallel_size);
}

microbatch_plan microbatch_plan_of(const megatron_args& a) {
  const auto& t = a.training;
  microbatch_plan p{t.micro_batch_size.value_or(1), a.derived.data_parallel_size, t.global_batch_size.value_or(1),
                    std::nullopt, t.decrease_batch_size_if_needed};
  if (t.rampup_batch_size && t.rampup_batch_size->size() == 3) {
    const auto& v = *t.rampup_batch_size;
    p.rampup = batch_rampup{*parse_python_int(v[0]), *parse_python_int(v[1]), *parse_python_int(v[2])};
  }
  return p;
}

std::int64_t microbatch_plan::train_iters_for_samples(std::int64_t train_samples) const {
  if (!rampup) return train_samples / global_batch_size;
  std::int64_t iterations = 0, consumed = 0;
  while (consumed <= rampup->samples && consumed <= train_samples) {
    consumed += current_global_batch_size(consumed);
    ++iterations;
  }
  if (train_samples > consumed) iterations += (train_samples - consumed) / global_batch_size;
  return iterations;
}

}  // namespace mactor::config
