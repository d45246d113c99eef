// Megatron-Core's GPTDataset: document/sample/shuffle index building (data_format.md §4), the
// index cache (§5), item assembly with masks and position ids, and the mock data source.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/index_array.hpp"
#include "data/indexed_dataset.hpp"
#include "data/split.hpp"

namespace mactor::data {

/// A list of dataset prefixes with optional weights (--data-path and friends).
struct data_blend {
  std::vector<std::string> prefixes;
  std::vector<double> weights;  // empty: no weights given
};

/// What GPTDatasetConfig holds, as plain values; the integrator fills it from Megatron's flags.
struct gpt_dataset_config {
  std::int64_t sequence_length = 0;                 // --seq-length
  std::uint32_t random_seed = 1234;                 // --seed
  std::optional<std::string> split;                 // --split, as given (e.g. "969, 30, 1")
  std::optional<data_blend> blend;                  // --data-path
  std::array<std::optional<data_blend>, 3> blend_per_split;  // --train/valid/test-data-path
  bool mock = false;  // set automatically when there is no blend at all
  bool reset_position_ids = false;                  // --reset-position-ids
  bool reset_attention_mask = false;                // --reset-attention-mask
  bool eod_mask_loss = false;                       // --eod-mask-loss
  bool multiple_validation_sets = false;            // --multiple-validation-sets
  bool create_attention_mask = true;                // --no-create-attention-mask-in-dataloader
  bool drop_last_partial_validation_sequence = true;
  bool add_extra_token_to_sequence = true;
  std::optional<std::string> path_to_cache;         // --data-cache-path
  double mid_level_dataset_surplus = 0.005;         // --mid-level-dataset-surplus
  std::int64_t eod = 0;                             // tokenizer.eod
  std::optional<std::int64_t> pad;                  // tokenizer.pad; none: the -1 sentinel
  nlohmann::ordered_json tokenizer_identifiers = nlohmann::ordered_json::object();
  bool write_cache = true;  // false on ranks that only load caches rank 0 wrote

  /// mock when no blend is given; "1,1,1" split for mock; the split matrix (nullopt for per-split
  /// blends). Throws data_error when blend and blend_per_split are mixed or split is missing.
  void finalize();
  split_matrix matrix;  // filled by finalize()
};

/// The sequences a GPT dataset draws from: an indexed dataset or mock data.
class token_source {
 public:
  virtual ~token_source() = default;
  virtual const std::vector<std::int32_t>& sequence_lengths() const = 0;
  /// Appends `length` tokens of sequence i starting at `offset`.
  virtual void append_tokens(std::size_t i, std::int64_t offset, std::int64_t length,
                             std::vector<std::int64_t>& out) const = 0;
};

/// An indexed dataset as a token source.
class indexed_token_source : public token_source {
 public:
  explicit indexed_token_source(const std::string& prefix) : ds_(prefix) {}
  const std::vector<std::int32_t>& sequence_lengths() const override { return ds_.sequence_lengths(); }
  void append_tokens(std::size_t i, std::int64_t offset, std::int64_t length,
                     std::vector<std::int64_t>& out) const override {
    ds_.append_tokens(i, offset, length, out);
  }
  const indexed_dataset& dataset() const { return ds_; }

 private:
  indexed_dataset ds_;
};

/// MockGPTLowLevelDataset: 100000 sequences with lengths default_rng(0).integers(1, 4096);
/// sequence i is 1, 2, ..., len-1 followed by eod.
class mock_token_source : public token_source {
 public:
  explicit mock_token_source(std::int64_t eod);
  const std::vector<std::int32_t>& sequence_lengths() const override { return lengths_; }
  void append_tokens(std::size_t i, std::int64_t offset, std::int64_t length,
                     std::vector<std::int64_t>& out) const override;

 private:
  std::int64_t eod_;
  std::vector<std::int32_t> lengths_;
};

/// The three index arrays of one GPTDataset split.
struct gpt_indices {
  std::vector<std::int32_t> document_index;
  // (rows, 2) row-major: (document_index position, offset); int32 unless values may overflow it.
  index_array<std::int32_t> sample_index;
  index_array<std::uint32_t> shuffle_index;  // uint32 unless >= 2^32-2 samples
  int num_epochs = 1;
  bool separate_final_epoch = false;
  std::size_t num_samples() const { return sample_index.size() / 2 - 1; }
};

/// Parameters of one split's index build.
struct gpt_index_request {
  std::int64_t begin = 0, end = 0;         // the split's sequence range [begin, end)
  std::optional<std::int64_t> num_samples; // none: one epoch
  std::int64_t sequence_length = 0;
  std::uint32_t seed = 1234;
  bool add_extra_token = true;
  bool drop_last_partial_sequence = true;
};

/// Builds document, sample and shuffle indices exactly as GPTDataset does.
gpt_indices build_gpt_indices(std::span<const std::int32_t> sizes, const gpt_index_request& r);
/// helpers.cpp build_sample_idx, as (rows, 2) row-major, in int64 when `wide`.
index_array<std::int32_t> build_sample_index(std::span<const std::int32_t> sizes,
                                             std::span<const std::int32_t> document_index,
                                             std::int64_t sequence_length, int num_epochs,
                                             std::int64_t tokens_per_epoch, bool drop_last,
                                             int add_extra_token, bool wide = false);

/// One training sample; shapes (L) except attention_mask (L, L), true where masked.
struct gpt_sample {
  std::vector<std::int64_t> tokens, labels, position_ids;
  std::vector<float> loss_mask;
  std::vector<std::uint8_t> attention_mask;  // empty when create_attention_mask is off
  int dataset_id = -1;                       // set by blended datasets
};

/// Anything that yields samples: one GPT dataset or a blend of them.
class sample_dataset {
 public:
  virtual ~sample_dataset() = default;
  virtual std::size_t size() const = 0;
  /// Sample i; nullopt gives Megatron's batch-padding sample (sample 0 with a zero loss mask).
  virtual gpt_sample get(std::optional<std::size_t> i) const = 0;
  virtual const nlohmann::ordered_json& unique_identifiers() const = 0;
};

/// A GPTDataset (or MockGPTDataset) over one split of one token source.
class gpt_dataset : public sample_dataset {
 public:
  /// `dataset_path` is the prefix (nullopt for mock). Loads the index cache when all four files
  /// exist under the cache directory, else builds the indices (and saves them if a cache
  /// directory applies and config.write_cache).
  gpt_dataset(std::shared_ptr<const token_source> source, std::optional<std::string> dataset_path,
              std::int64_t begin, std::int64_t end, std::optional<std::int64_t> num_samples,
              int split, const gpt_dataset_config& config);

  std::size_t size() const override { return idx_.num_samples(); }
  gpt_sample get(std::optional<std::size_t> i) const override;
  const nlohmann::ordered_json& unique_identifiers() const override { return ids_; }
  /// json.dumps(unique_identifiers, indent=4) and its md5 hex digest.
  const std::string& unique_description() const { return description_; }
  const std::string& unique_description_hash() const { return hash_; }
  const gpt_indices& indices() const { return idx_; }
  /// The raw token window of sample i (L + X tokens, pad-filled), before the label shift.
  std::vector<std::int64_t> sample_text(std::size_t i) const;
  /// Where the cache files are (empty when no cache applies) and whether they were loaded.
  const std::string& cache_dir() const { return cache_dir_; }
  bool loaded_from_cache() const { return loaded_; }

 private:
  bool try_load_cache(const std::string& base);
  void save_cache(const std::string& base) const;
  std::shared_ptr<const token_source> source_;
  gpt_dataset_config config_;
  int split_;
  std::int64_t pad_;
  nlohmann::ordered_json ids_;
  std::string description_, hash_, cache_dir_;
  gpt_indices idx_;
  bool loaded_ = false;
};

}  // namespace mactor::data
