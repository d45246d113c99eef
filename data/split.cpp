// --split parsing: regex `[.0-9]+` matches, normalized, turned into bookends; rounding as Python's.
#include "data/split.hpp"

#include <cmath>
#include <vector>

#include "data/data_error.hpp"

namespace mactor::data {

const char* split_name(int split) {
  static const char* names[] = {"train", "valid", "test"};
  return names[split];
}

std::array<double, 3> parse_and_normalize_split(const std::string& split) {
  std::vector<double> values;
  for (std::size_t i = 0; i < split.size();) {
    auto is_num = [&](char c) { return c == '.' || (c >= '0' && c <= '9'); };
    if (!is_num(split[i])) { ++i; continue; }
    std::size_t j = i;
    while (j < split.size() && is_num(split[j])) ++j;
    const std::string tok = split.substr(i, j - i);
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size())
      throw data_error("--split=" + split + ": '" + tok + "' is not a number; write e.g. 969,30,1");
    values.push_back(v);
    i = j;
  }
  if (values.size() > 3)
    throw data_error("--split=" + split + ": has " + std::to_string(values.size()) +
                     " values but there are only 3 splits (train, valid, test)");
  std::array<double, 3> w{0.0, 0.0, 0.0};
  for (std::size_t k = 0; k < values.size(); ++k) w[k] = values[k];
  const double sum = w[0] + w[1] + w[2];
  if (!(sum > 0))
    throw data_error("--split=" + split + ": the weights sum to 0; give at least one positive weight");
  for (auto& x : w) x /= sum;
  return w;
}

split_matrix convert_split_vector_to_split_matrix(const std::array<double, 3>& v) {
  const std::array<double, 4> c{0.0, v[0], v[0] + v[1], v[0] + v[1] + v[2]};
  split_matrix m;
  for (int i = 0; i < 3; ++i)
    if (c[i + 1] > c[i]) m[i] = std::make_pair(c[i], c[i + 1]);
  return m;
}

std::optional<std::pair<std::int64_t, std::int64_t>> split_range(const split_matrix& m, int split,
                                                                 std::int64_t n) {
  if (!m[split]) return std::nullopt;
  // std::nearbyint in the default rounding mode rounds half to even, like Python's round().
  const auto beg = static_cast<std::int64_t>(std::nearbyint(m[split]->first * static_cast<double>(n)));
  const auto end = static_cast<std::int64_t>(std::nearbyint(m[split]->second * static_cast<double>(n)));
  return std::make_pair(beg, std::max(beg, end));
}

}  // namespace mactor::data
