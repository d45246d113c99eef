// GPTDataset index building, caching and item assembly (data_format.md §4-5).
#include "data/gpt_dataset.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "data/data_error.hpp"
#include "data/md5.hpp"
#include "data/npy.hpp"
#include "data/numpy_random.hpp"
#include "data/py_json.hpp"

namespace mactor::data {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Config

void gpt_dataset_config::finalize() {
  const bool per_split = std::any_of(blend_per_split.begin(), blend_per_split.end(),
                                     [](const auto& b) { return b.has_value(); });
  if (per_split) {
    if (blend)
      throw data_error("--data-path cannot be combined with --train-data-path/--valid-data-path/"
                       "--test-data-path; use one or the other");
    if (split)
      throw data_error("--split cannot be combined with --train-data-path/--valid-data-path/"
                       "--test-data-path; drop --split");
    matrix = {};
    return;
  }
  if (!blend) {
    mock = true;
    split = "1,1,1";
  } else if (!split) {
    throw data_error("a split is required with --data-path or --data-args-path; pass --split (e.g. 969,30,1)");
  }
  if (blend && !blend->weights.empty() && blend->weights.size() != blend->prefixes.size())
    throw data_error("--data-path: " + std::to_string(blend->weights.size()) + " weights for " +
                     std::to_string(blend->prefixes.size()) + " prefixes; give one weight per prefix");
  matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(*split));
}

// ---------------------------------------------------------------------------------------------
// Mock source

mock_token_source::mock_token_source(std::int64_t eod) : eod_(eod) {
  pcg64_generator rng(0);
  lengths_ = rng.integers_int32(1, 4096, 100000);
}

void mock_token_source::append_tokens(std::size_t i, std::int64_t offset, std::int64_t length,
                                      std::vector<std::int64_t>& out) const {
  const std::int64_t len = lengths_.at(i);
  for (std::int64_t k = offset; k < offset + length && k < len; ++k)
    out.push_back(k == len - 1 ? eod_ : k + 1);
}

// ---------------------------------------------------------------------------------------------
// Index building

namespace {

template <typename T>
void fill_sample_index(std::vector<T>& out, std::span<const std::int32_t> sizes,
                       std::span<const std::int32_t> document_index, std::int64_t L, std::int64_t num_samples,
                       int X) {
  std::int64_t d = 0, off = 0;
  const auto last = static_cast<std::int64_t>(document_index.size()) - 1;
  for (std::int64_t row = 1; row <= num_samples; ++row) {
    std::int64_t need = L + X;
    while (need != 0) {
      const std::int64_t len = sizes[static_cast<std::size_t>(document_index[static_cast<std::size_t>(d)])] - off;
      need -= len;
      if (need <= 0) {
        off += need + len - X;
        need = 0;
      } else {
        if (d == last) {
          off = sizes[static_cast<std::size_t>(document_index[static_cast<std::size_t>(d)])] - X;
          break;
        }
        ++d;
        off = 0;
      }
    }
    out[2 * static_cast<std::size_t>(row)] = static_cast<T>(d);
    out[2 * static_cast<std::size_t>(row) + 1] = static_cast<T>(off);
  }
}

}  // namespace

index_array<std::int32_t> build_sample_index(std::span<const std::int32_t> sizes,
                                             std::span<const std::int32_t> document_index,
                                             std::int64_t L, int num_epochs,
                                             std::int64_t tokens_per_epoch, bool drop_last,
                                             int X, bool wide) {
  std::int64_t num_samples;
  const std::int64_t total = num_epochs * tokens_per_epoch - X;
  if (drop_last)
    num_samples = total / L;
  else  // helpers.cpp computes this in single precision
    num_samples = static_cast<std::int64_t>(std::ceil(static_cast<float>(total) / static_cast<float>(L)));
  index_array<std::int32_t> out(2 * static_cast<std::size_t>(num_samples + 1), wide);
  if (wide)
    fill_sample_index(out.wide_values(), sizes, document_index, L, num_samples, X);
  else
    fill_sample_index(out.narrow_values(), sizes, document_index, L, num_samples, X);
  return out;
}

namespace {

std::vector<std::int32_t> document_index_epochs(std::int64_t begin, std::int64_t end, int epochs,
                                                legacy_random_state& rng) {
  std::vector<std::int32_t> di;
  di.reserve(static_cast<std::size_t>((end - begin) * epochs));
  for (int e = 0; e < epochs; ++e)
    for (std::int64_t k = begin; k < end; ++k) di.push_back(static_cast<std::int32_t>(k));
  rng.shuffle(std::span<std::int32_t>(di));
  return di;
}

// numpy's shuffle index: [0, first) shuffled, then [first, n) shuffled (empty without a separate
// final epoch), both from one stream.
template <typename T>
void fill_shuffle_index(std::vector<T>& out, std::size_t first, legacy_random_state& rng) {
  std::iota(out.begin(), out.end(), T{0});
  rng.shuffle(std::span<T>(out.data(), first));
  rng.shuffle(std::span<T>(out.data() + first, out.size() - first));
}

}  // namespace

gpt_indices build_gpt_indices(std::span<const std::int32_t> sizes, const gpt_index_request& r) {
  const std::int64_t L = r.sequence_length, X = r.add_extra_token ? 1 : 0;
  if (L <= 1) throw data_error("--seq-length must be > 1 to build GPT samples, got " + std::to_string(L));
  std::int64_t T = 0;
  for (std::int64_t k = r.begin; k < r.end; ++k) T += sizes[static_cast<std::size_t>(k)];
  if (T <= 1)
    throw data_error("the split has " + std::to_string(T) +
                     " tokens; GPT samples need more: give the split a larger share (--split) or more data");
  gpt_indices out;
  int E = 1;
  if (r.num_samples) {
    const std::int64_t want = *r.num_samples * L + X;
    for (std::int64_t have = T; have < want; have += T) ++E;
  }
  out.num_epochs = E;
  std::int64_t before_final = 0;
  if (E > 1) {
    before_final = ((E - 1) * T - X) / L;
    const std::int64_t from_final = *r.num_samples - before_final;
    const std::int64_t per_epoch = (T - X) / L;
    if (from_final < 0 || from_final > per_epoch + 1)
      throw data_error("internal: samples from the final epoch out of range");
    out.separate_final_epoch = from_final < static_cast<std::int64_t>(0.80 * static_cast<double>(per_epoch));
  }
  legacy_random_state rng(r.seed);
  if (!out.separate_final_epoch) {
    out.document_index = document_index_epochs(r.begin, r.end, E, rng);
  } else {
    out.document_index = document_index_epochs(r.begin, r.end, E - 1, rng);
    auto last = document_index_epochs(r.begin, r.end, 1, rng);
    out.document_index.insert(out.document_index.end(), last.begin(), last.end());
  }
  const bool sizes_big = !sizes.empty() && *std::max_element(sizes.begin(), sizes.end()) >
                                               std::numeric_limits<std::int32_t>::max();
  const bool sample_index_wide = sizes_big || out.document_index.size() >
                                                  static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());
  out.sample_index = build_sample_index(sizes, out.document_index, L, E, T,
                                        r.drop_last_partial_sequence, static_cast<int>(X), sample_index_wide);
  const auto n = static_cast<std::int64_t>(out.num_samples());
  const std::int64_t first = out.separate_final_epoch ? before_final : n;
  out.shuffle_index = index_array<std::uint32_t>(static_cast<std::size_t>(n),
                                                 n >= static_cast<std::int64_t>(0xffffffffULL - 1));
  if (out.shuffle_index.wide())
    fill_shuffle_index(out.shuffle_index.wide_values(), static_cast<std::size_t>(first), rng);
  else
    fill_shuffle_index(out.shuffle_index.narrow_values(), static_cast<std::size_t>(first), rng);
  return out;
}

// ---------------------------------------------------------------------------------------------
// gpt_dataset

gpt_dataset::gpt_dataset(std::shared_ptr<const token_source> source,
                         std::optional<std::string> dataset_path, std::int64_t begin,
                         std::int64_t end, std::optional<std::int64_t> num_samples, int split,
                         const gpt_dataset_config& config)
    : source_(std::move(source)), config_(config), split_(split), pad_(config.pad.value_or(-1)) {
  const std::string cls = config.mock ? "MockGPTDataset" : "GPTDataset";
  ids_ = nlohmann::ordered_json::object();
  ids_["class"] = cls;
  ids_["dataset_path"] = dataset_path ? nlohmann::ordered_json(*dataset_path) : nlohmann::ordered_json();
  ids_["num_samples"] = num_samples ? nlohmann::ordered_json(*num_samples) : nlohmann::ordered_json();
  ids_["index_split"] = split_name(split);
  ids_["random_seed"] = config.random_seed;
  ids_["sequence_length"] = config.sequence_length;
  ids_["split"] = config.split ? nlohmann::ordered_json(*config.split) : nlohmann::ordered_json();
  const bool has_matrix = std::any_of(config.matrix.begin(), config.matrix.end(),
                                      [](const auto& m) { return m.has_value(); });
  if (has_matrix) {
    auto m = nlohmann::ordered_json::array();
    for (int i = 0; i < 3; ++i) {
      if (!config.matrix[i]) { m.push_back(nullptr); continue; }
      auto pair = nlohmann::ordered_json::array();
      // The first bookend is Python's int 0; every later value is a float.
      if (i == 0) pair.push_back(0); else pair.push_back(config.matrix[i]->first);
      pair.push_back(config.matrix[i]->second);
      m.push_back(pair);
    }
    ids_["split_matrix"] = m;
  } else {
    ids_["split_matrix"] = nullptr;
  }
  ids_["tokenizer"] = config.tokenizer_identifiers;
  description_ = py_json_dumps(ids_);
  hash_ = md5_hex(description_);

  if (config.path_to_cache && !config.path_to_cache->empty())
    cache_dir_ = *config.path_to_cache;
  else if (!config.mock && dataset_path)
    cache_dir_ = (fs::path(*dataset_path) / "cache" / (cls + "_indices")).string();
  const std::string base = cache_dir_.empty() ? "" : (fs::path(cache_dir_) / (hash_ + "-" + cls + "-" + split_name(split))).string();
  if (!base.empty() && try_load_cache(base)) {
    loaded_ = true;
    return;
  }
  gpt_index_request r;
  r.begin = begin;
  r.end = end;
  r.num_samples = num_samples;
  r.sequence_length = config.sequence_length;
  r.seed = config.random_seed;
  r.add_extra_token = config.add_extra_token_to_sequence;
  r.drop_last_partial_sequence = split == 1 ? config.drop_last_partial_validation_sequence : true;
  idx_ = build_gpt_indices(source_->sequence_lengths(), r);
  if (!base.empty() && config.write_cache) save_cache(base);
}

namespace {

// A cached index array: the file's mapping when it holds the narrow dtype or int64 (what
// Megatron writes), else its values converted.
template <typename Narrow>
index_array<Narrow> index_from_npy(const std::string& path, const char* narrow_descr) {
  auto m = map_npy(path);
  if (m.header.descr == narrow_descr)
    return index_array<Narrow>::mapped(std::move(m.hold), m.data, m.bytes / sizeof(Narrow), false);
  if (m.header.descr == "<i8")
    return index_array<Narrow>::mapped(std::move(m.hold), m.data, m.bytes / sizeof(std::int64_t), true);
  const auto a = read_npy(path);
  return index_array<Narrow>::from_values(npy_to_int64(a, path), a.descr.size() == 3 && a.descr[2] == '8');
}

}  // namespace

bool gpt_dataset::try_load_cache(const std::string& base) {
  const std::string files[] = {base + "-description.txt", base + "-document_index.npy",
                               base + "-sample_index.npy", base + "-shuffle_index.npy"};
  for (const auto& f : files)
    if (!fs::is_regular_file(f)) return false;
  auto d = read_npy(files[1]);
  auto di = npy_to_int64(d, files[1]);
  idx_.document_index.assign(di.begin(), di.end());
  idx_.sample_index = index_from_npy<std::int32_t>(files[2], "<i4");
  idx_.shuffle_index = index_from_npy<std::uint32_t>(files[3], "<u4");
  if (idx_.sample_index.size() < 2 || idx_.shuffle_index.size() != idx_.num_samples())
    throw data_error(files[3] + ": the cached indices disagree in size (" +
                     std::to_string(idx_.shuffle_index.size()) + " shuffled vs " +
                     std::to_string(idx_.num_samples()) + " samples); delete " + cache_dir_ + " and rerun");
  return true;
}

void gpt_dataset::save_cache(const std::string& base) const {
  std::error_code ec;
  fs::create_directories(cache_dir_, ec);
  if (ec)
    throw data_error(cache_dir_ + ": cannot create the index cache directory (" + ec.message() +
                     "); pass a writable --data-cache-path");
  {
    std::ofstream out(base + "-description.txt", std::ios::binary);
    out << description_;
    if (!out) throw data_error(base + "-description.txt: write failed");
  }
  write_npy(base + "-document_index.npy", "<i4", {static_cast<std::int64_t>(idx_.document_index.size())},
            idx_.document_index.data(), idx_.document_index.size() * 4);
  const std::int64_t rows = static_cast<std::int64_t>(idx_.sample_index.size() / 2);
  write_npy(base + "-sample_index.npy", idx_.sample_index.wide() ? "<i8" : "<i4", {rows, 2}, idx_.sample_index.data(),
            idx_.sample_index.bytes());
  const auto n = static_cast<std::int64_t>(idx_.shuffle_index.size());
  write_npy(base + "-shuffle_index.npy", idx_.shuffle_index.wide() ? "<i8" : "<u4", {n}, idx_.shuffle_index.data(),
            idx_.shuffle_index.bytes());
}

std::vector<std::int64_t> gpt_dataset::sample_text(std::size_t i) const {
  if (i >= size())
    throw data_error("sample " + std::to_string(i) + " is out of range (the dataset has " +
                     std::to_string(size()) + " samples)");
  const std::int64_t X = config_.add_extra_token_to_sequence ? 1 : 0;
  const auto j = static_cast<std::size_t>(idx_.shuffle_index[i]);
  const std::int64_t d0 = idx_.sample_index[2 * j], o0 = idx_.sample_index[2 * j + 1];
  const std::int64_t d1 = idx_.sample_index[2 * j + 2], o1 = idx_.sample_index[2 * j + 3];
  const auto& sizes = source_->sequence_lengths();
  std::vector<std::int64_t> text;
  text.reserve(static_cast<std::size_t>(config_.sequence_length + X));
  auto doc = [&](std::int64_t d) { return static_cast<std::size_t>(idx_.document_index[static_cast<std::size_t>(d)]); };
  if (d0 == d1) {
    source_->append_tokens(doc(d0), o0, o1 - o0 + X, text);
  } else {
    for (std::int64_t d = d0; d <= d1; ++d) {
      const std::int64_t off = d == d0 ? o0 : 0;
      const std::int64_t len = d < d1 ? sizes[doc(d)] - off : o1 + X;
      source_->append_tokens(doc(d), off, len, text);
    }
  }
  text.resize(static_cast<std::size_t>(std::max<std::int64_t>(
                  static_cast<std::int64_t>(text.size()), config_.sequence_length + X)),
              pad_);
  return text;
}

gpt_sample gpt_dataset::get(std::optional<std::size_t> i) const {
  const std::vector<std::int64_t> text = sample_text(i.value_or(0));
  gpt_sample s;
  if (config_.add_extra_token_to_sequence) {
    s.tokens.assign(text.begin(), text.end() - 1);
    s.labels.assign(text.begin() + 1, text.end());
  } else {
    s.tokens = text;
    s.labels.assign(text.begin() + 1, text.end());
    s.labels.push_back(pad_);
  }
  const std::size_t L = s.tokens.size();
  const std::int64_t eod = config_.eod;
  s.loss_mask.assign(L, 1.0f);
  if (config_.eod_mask_loss)
    for (std::size_t k = 0; k < L; ++k)
      if (s.tokens[k] == eod) s.loss_mask[k] = 0.0f;
  s.position_ids.resize(L);
  std::iota(s.position_ids.begin(), s.position_ids.end(), 0);
  if (config_.create_attention_mask) {
    s.attention_mask.assign(L * L, 0);
    for (std::size_t r = 0; r < L; ++r)
      for (std::size_t c = r + 1; c < L; ++c) s.attention_mask[r * L + c] = 1;
  }
  if (config_.reset_position_ids || config_.reset_attention_mask) {
    std::int64_t prev = 0;
    for (std::size_t e = 0; e < L; ++e) {
      if (s.tokens[e] != eod) continue;
      if (config_.reset_attention_mask && config_.create_attention_mask)
        for (std::size_t r = e + 1; r < L; ++r)
          for (std::size_t c = 0; c <= e; ++c) s.attention_mask[r * L + c] = 1;
      if (config_.reset_position_ids) {
        const std::int64_t shift = static_cast<std::int64_t>(e) + 1 - prev;
        for (std::size_t r = e + 1; r < L; ++r) s.position_ids[r] -= shift;
        prev = static_cast<std::int64_t>(e) + 1;
      }
    }
  }
  for (std::size_t k = 0; k < L; ++k) {
    if (s.labels[k] == pad_) s.loss_mask[k] = 0.0f;
    if (s.tokens[k] == pad_) s.tokens[k] = 0;
    if (s.labels[k] == pad_) s.labels[k] = 0;
  }
  if (!i) std::fill(s.loss_mask.begin(), s.loss_mask.end(), 0.0f);
  return s;
}

}  // namespace mactor::data
