// Blending indices, BlendedDataset caching, and the top-level train/valid/test builder.
#include "data/blended_dataset.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "data/data_error.hpp"
#include "data/md5.hpp"
#include "data/npy.hpp"
#include "data/py_json.hpp"

namespace mactor::data {
namespace fs = std::filesystem;

std::pair<std::vector<std::int16_t>, std::vector<std::int64_t>> build_blending_indices(
    const std::vector<double>& weights, std::int64_t size) {
  std::vector<std::int16_t> di(static_cast<std::size_t>(size));
  std::vector<std::int64_t> dsi(static_cast<std::size_t>(size));
  std::vector<std::int64_t> count(weights.size(), 0);
  for (std::int64_t s = 0; s < size; ++s) {
    const double sd = std::max(static_cast<double>(s), 1.0);
    std::size_t best = 0;
    double best_err = weights[0] * sd - static_cast<double>(count[0]);
    for (std::size_t k = 1; k < weights.size(); ++k) {
      const double err = weights[k] * sd - static_cast<double>(count[k]);
      if (err > best_err) { best_err = err; best = k; }
    }
    di[static_cast<std::size_t>(s)] = static_cast<std::int16_t>(best);
    dsi[static_cast<std::size_t>(s)] = count[best]++;
  }
  return {std::move(di), std::move(dsi)};
}

std::pair<std::vector<std::int16_t>, std::vector<std::int64_t>> build_exhaustive_blending_indices(
    const std::vector<std::int64_t>& sizes) {
  std::int64_t total = 0;
  std::set<std::size_t> unspent;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    total += sizes[k];
    if (sizes[k] > 0) unspent.insert(k);
  }
  std::vector<double> w(sizes.size());
  for (std::size_t k = 0; k < sizes.size(); ++k) w[k] = static_cast<double>(sizes[k]) / static_cast<double>(total);
  std::vector<std::int16_t> di;
  std::vector<std::int64_t> dsi;
  std::vector<std::int64_t> count(sizes.size(), 0);
  for (std::int64_t s = 0; !unspent.empty(); ++s) {
    const double sd = std::max(static_cast<double>(s), 1.0);
    std::size_t best = 0;
    double best_err = std::numeric_limits<double>::lowest();
    bool found = false;
    for (std::size_t k : unspent) {
      const double err = w[k] * sd - static_cast<double>(count[k]);
      if (!found || err > best_err) { best_err = err; best = k; found = true; }
    }
    di.push_back(static_cast<std::int16_t>(best));
    dsi.push_back(count[best]++);
    if (count[best] == sizes[best]) unspent.erase(best);
  }
  return {std::move(di), std::move(dsi)};
}

blended_dataset::blended_dataset(std::vector<std::shared_ptr<sample_dataset>> datasets,
                                 std::vector<double> weights, std::optional<std::int64_t> size,
                                 int split, const gpt_dataset_config& config)
    : datasets_(std::move(datasets)) {
  if (datasets_.size() != weights.size() || datasets_.empty() || datasets_.size() >= 32767)
    throw data_error("a blend needs one weight per dataset and fewer than 32767 datasets");
  bool ints = true;
  for (double w : weights) {
    if (!(w > 0)) throw data_error("blend weights must be positive; got " + py_float_repr(w));
    ints = ints && w == std::floor(w);
  }
  if (size) weights = normalized(std::move(weights));
  ids_ = nlohmann::ordered_json::object();
  ids_["class"] = "BlendedDataset";
  auto children = nlohmann::ordered_json::array();
  for (const auto& d : datasets_) children.push_back(d->unique_identifiers());
  ids_["datasets"] = children;
  ids_["split"] = split_name(split);
  auto wj = nlohmann::ordered_json::array();
  // Without a size the weights are the datasets' lengths, which Python holds as ints.
  for (double w : weights)
    wj.push_back(size ? nlohmann::ordered_json(w) : nlohmann::ordered_json(static_cast<std::int64_t>(w)));
  ids_["weights"] = wj;
  ids_["size"] = size ? nlohmann::ordered_json(*size) : nlohmann::ordered_json();
  description_ = py_json_dumps(ids_);
  hash_ = md5_hex(description_);

  std::string base;
  if (config.path_to_cache && !config.path_to_cache->empty())
    base = (fs::path(*config.path_to_cache) / (hash_ + "-BlendedDataset-" + split_name(split))).string();
  const std::string f_desc = base + "-description.txt", f_di = base + "-dataset_index.npy",
                    f_dsi = base + "-dataset_sample_index.npy";
  if (!base.empty() && fs::is_regular_file(f_desc) && fs::is_regular_file(f_di) && fs::is_regular_file(f_dsi)) {
    auto di = npy_to_int64(read_npy(f_di), f_di);
    dataset_index_.assign(di.begin(), di.end());
    dataset_sample_index_ = npy_to_int64(read_npy(f_dsi), f_dsi);
    return;
  }
  if (size) {
    std::tie(dataset_index_, dataset_sample_index_) = build_blending_indices(weights, *size);
  } else {
    if (!ints) throw data_error("a blend without a sample count needs whole-number weights");
    std::vector<std::int64_t> sizes(weights.begin(), weights.end());
    std::tie(dataset_index_, dataset_sample_index_) = build_exhaustive_blending_indices(sizes);
  }
  std::vector<std::int64_t> asked(datasets_.size(), 0);
  for (auto k : dataset_index_) ++asked[static_cast<std::size_t>(k)];
  for (std::size_t k = 0; k < datasets_.size(); ++k)
    if (asked[k] > static_cast<std::int64_t>(datasets_[k]->size()))
      throw data_error(std::string("the ") + split_name(split) + " blend asks dataset " + std::to_string(k) +
                       " for " + std::to_string(asked[k]) + " samples but it has only " +
                       std::to_string(datasets_[k]->size()) +
                       "; raise --mid-level-dataset-surplus (now " + py_float_repr(config.mid_level_dataset_surplus) + ")");
  if (!base.empty() && config.write_cache) {
    std::error_code ec;
    fs::create_directories(*config.path_to_cache, ec);
    std::ofstream(f_desc, std::ios::binary) << description_;
    write_npy(f_di, "<i2", {static_cast<std::int64_t>(dataset_index_.size())}, dataset_index_.data(),
              dataset_index_.size() * 2);
    write_npy(f_dsi, "<i8", {static_cast<std::int64_t>(dataset_sample_index_.size())},
              dataset_sample_index_.data(), dataset_sample_index_.size() * 8);
  }
}

gpt_sample blended_dataset::get(std::optional<std::size_t> i) const {
  const std::size_t k = i.value_or(0);
  if (k >= size())
    throw data_error("sample " + std::to_string(k) + " is out of range (the blend has " + std::to_string(size()) + ")");
  const auto d = static_cast<std::size_t>(dataset_index_[k]);
  gpt_sample s = datasets_[d]->get(static_cast<std::size_t>(dataset_sample_index_[k]));
  if (!i) std::fill(s.loss_mask.begin(), s.loss_mask.end(), 0.0f);
  s.dataset_id = static_cast<int>(d);
  return s;
}

std::vector<std::array<std::optional<std::int64_t>, 3>> size_per_split_per_dataset(
    const std::vector<double>& w, const std::array<std::optional<std::int64_t>, 3>& sizes,
    double surplus) {
  std::vector<std::array<std::optional<std::int64_t>, 3>> out(w.size());
  for (std::size_t k = 0; k < w.size(); ++k)
    for (int s = 0; s < 3; ++s)
      if (sizes[s])
        out[k][s] = static_cast<std::int64_t>(
            std::ceil(std::ceil(static_cast<double>(*sizes[s]) * w[k]) * (1 + surplus)));
  return out;
}

namespace {

using sizes3 = std::array<std::optional<std::int64_t>, 3>;
using datasets3 = std::array<std::shared_ptr<sample_dataset>, 3>;

datasets3 build_splits(const std::optional<std::string>& prefix, const split_matrix& m,
                       const sizes3& sizes, const gpt_dataset_config& config) {
  std::shared_ptr<const token_source> src;
  if (prefix)
    src = std::make_shared<indexed_token_source>(*prefix);
  else
    src = std::make_shared<mock_token_source>(config.eod);
  const auto n = static_cast<std::int64_t>(src->sequence_lengths().size());
  datasets3 out;
  for (int s = 0; s < 3; ++s) {
    auto r = split_range(m, s, n);
    if (!r) continue;
    out[s] = std::make_shared<gpt_dataset>(src, prefix, r->first, r->second, sizes[s], s, config);
  }
  return out;
}

}  // namespace

double numpy_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double r = 0.0;
    for (std::size_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_sum(a, n2) + numpy_sum(a + n2, n - n2);
}

std::vector<double> normalized(std::vector<double> w) {
  const double sum = numpy_sum(w.data(), w.size());
  for (double& x : w) x /= sum;
  return w;
}

namespace {

// One blend for the splits in `m`: a single GPTDataset per split, or a BlendedDataset.
datasets3 build_blend(const data_blend& blend, const split_matrix& m, const sizes3& sizes,
                      const gpt_dataset_config& config) {
  if (blend.prefixes.size() == 1 && blend.weights.empty()) return build_splits(blend.prefixes[0], m, sizes, config);
  std::vector<double> w = blend.weights.empty() ? std::vector<double>{} : normalized(blend.weights);
  std::vector<sizes3> target, buffer;
  if (w.empty()) {
    buffer.assign(blend.prefixes.size(), sizes3{});
  } else {
    for (int s = 0; s < 3; ++s)
      if (m[s] && !sizes[s])
        throw data_error(std::string("the ") + split_name(s) + " split has blend weights but no sample count; "
                         "weights need a size (or drop the weights)");
    target = size_per_split_per_dataset(w, sizes, 0.0);
    buffer = size_per_split_per_dataset(w, sizes, config.mid_level_dataset_surplus);
  }
  std::vector<datasets3> per_prefix;
  for (std::size_t k = 0; k < blend.prefixes.size(); ++k)
    per_prefix.push_back(build_splits(blend.prefixes[k], m, buffer[k], config));
  datasets3 out;
  for (int s = 0; s < 3; ++s) {
    if (!m[s]) continue;
    std::vector<std::shared_ptr<sample_dataset>> children;
    for (auto& p : per_prefix) children.push_back(p[s]);
    std::vector<double> ws;
    std::optional<std::int64_t> size;
    if (!w.empty()) {
      ws = w;
      std::int64_t total = 0;
      for (auto& t : target) total += *t[s];
      size = total;
    } else {
      std::int64_t total = 0;
      for (auto& c : children) {
        ws.push_back(static_cast<double>(c->size()));
        total += static_cast<std::int64_t>(c->size());
      }
      if (sizes[s]) size = std::min(*sizes[s], total);
    }
    out[s] = std::make_shared<blended_dataset>(children, ws, size, s, config);
  }
  return out;
}

}  // namespace

datasets3 build_gpt_datasets(gpt_dataset_config config, const sizes3& sizes) {
  config.finalize();
  if (config.mock) return build_splits(std::nullopt, config.matrix, sizes, config);
  if (config.blend) return build_blend(*config.blend, config.matrix, sizes, config);
  datasets3 out;
  for (int s = 0; s < 3; ++s) {
    if (!config.blend_per_split[s] || (s == 1 && has_multiple_validation_sets(config))) continue;
    split_matrix spoof;
    spoof[s] = std::make_pair(0.0, 1.0);
    sizes3 sz{};
    sz[s] = sizes[s];
    out[s] = build_blend(*config.blend_per_split[s], spoof, sz, config)[s];
  }
  return out;
}

bool has_multiple_validation_sets(const gpt_dataset_config& config) {
  const auto& valid = config.blend_per_split[1];
  return config.multiple_validation_sets && !config.mock && !config.blend && valid && valid->prefixes.size() > 1;
}

std::vector<std::shared_ptr<sample_dataset>> build_validation_sets(gpt_dataset_config config,
                                                                   std::optional<std::int64_t> size) {
  config.finalize();
  if (!has_multiple_validation_sets(config)) return {};
  split_matrix spoof;
  spoof[1] = std::make_pair(0.0, 1.0);
  sizes3 sizes{};
  sizes[1] = size;
  std::vector<std::shared_ptr<sample_dataset>> sets;
  for (const auto& prefix : config.blend_per_split[1]->prefixes)
    sets.push_back(build_splits(prefix, spoof, sizes, config)[1]);
  return sets;
}

}  // namespace mactor::data
