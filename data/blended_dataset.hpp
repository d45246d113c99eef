// Megatron-Core's BlendedDataset: draws samples from several datasets in proportion to weights
// (helpers.cpp build_blending_indices / build_exhaustive_blending_indices), with its cache files.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/gpt_dataset.hpp"

namespace mactor::data {

/// (dataset_index int16, dataset_sample_index int64) for `size` samples and normalized weights.
std::pair<std::vector<std::int16_t>, std::vector<std::int64_t>> build_blending_indices(
    const std::vector<double>& weights, std::int64_t size);
/// Exactly sizes[k] samples from dataset k, interleaved by the same error rule.
std::pair<std::vector<std::int16_t>, std::vector<std::int64_t>> build_exhaustive_blending_indices(
    const std::vector<std::int64_t>& sizes);

/// A blend of GPT datasets of one split.
class blended_dataset : public sample_dataset {
 public:
  /// With `size`, weights are normalized and `size` samples are drawn; without, the weights must
  /// be whole numbers (the datasets' lengths) and every sample of every dataset is drawn once.
  /// Throws data_error when a dataset would be asked for more samples than it has.
  blended_dataset(std::vector<std::shared_ptr<sample_dataset>> datasets, std::vector<double> weights,
                  std::optional<std::int64_t> size, int split, const gpt_dataset_config& config);

  std::size_t size() const override { return dataset_index_.size(); }
  gpt_sample get(std::optional<std::size_t> i) const override;
  const nlohmann::ordered_json& unique_identifiers() const override { return ids_; }
  const std::string& unique_description() const { return description_; }
  const std::string& unique_description_hash() const { return hash_; }
  const std::vector<std::int16_t>& dataset_index() const { return dataset_index_; }
  const std::vector<std::int64_t>& dataset_sample_index() const { return dataset_sample_index_; }

 private:
  std::vector<std::shared_ptr<sample_dataset>> datasets_;
  nlohmann::ordered_json ids_;
  std::string description_, hash_;
  std::vector<std::int16_t> dataset_index_;
  std::vector<std::int64_t> dataset_sample_index_;
};

/// numpy.sum of a float64 array (pairwise summation, so that normalized weights match bit for bit).
double numpy_sum(const double* a, std::size_t n);
/// Megatron's normalize(): w / numpy.sum(w).
std::vector<double> normalized(std::vector<double> w);

/// Per-dataset sample counts for weighted blends: ceil(ceil(size * w) * (1 + surplus)).
std::vector<std::array<std::optional<std::int64_t>, 3>> size_per_split_per_dataset(
    const std::vector<double>& normalized_weights,
    const std::array<std::optional<std::int64_t>, 3>& sizes, double surplus);

/// Builds the three splits' datasets the way BlendedMegatronDatasetBuilder does, for the requested
/// sample counts (nullopt: one full epoch). A split that is not built is nullptr.
/// With multiple validation sets (below) the validation split is left to build_validation_sets.
std::array<std::shared_ptr<sample_dataset>, 3> build_gpt_datasets(
    gpt_dataset_config config, const std::array<std::optional<std::int64_t>, 3>& sizes);

/// Whether --multiple-validation-sets applies: a per-split validation blend of several prefixes
/// (with --data-path, or one validation prefix, there is one validation set, as in Megatron).
bool has_multiple_validation_sets(const gpt_dataset_config& config);
/// --multiple-validation-sets: each prefix of the validation blend as its own dataset, in order,
/// each of `size` samples (nullopt: one epoch); its weights are not used, as in Megatron.
std::vector<std::shared_ptr<sample_dataset>> build_validation_sets(gpt_dataset_config config,
                                                                   std::optional<std::int64_t> size);

}  // namespace mactor::data
