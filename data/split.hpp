// --split parsing and the train/valid/test split matrix, as Megatron-Core computes them.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace mactor::data {

/// Per split (train, valid, test): the (lo, hi) fraction of the dataset, or nullopt when unbuilt.
using split_matrix = std::array<std::optional<std::pair<double, double>>, 3>;

/// "train", "valid", "test" for 0, 1, 2.
const char* split_name(int split);

/// Every `[.0-9]+` in `split` as a float, padded with zeros to 3, normalized to sum 1.
/// Throws data_error for a value that is not a number, more than 3 values, or a zero sum.
std::array<double, 3> parse_and_normalize_split(const std::string& split);
/// Running sums as bookends; a split whose hi <= lo is nullopt.
split_matrix convert_split_vector_to_split_matrix(const std::array<double, 3>& vector);
/// The sequence range [beg, end) of split `split` over `num_elements` sequences (Python round()).
std::optional<std::pair<std::int64_t, std::int64_t>> split_range(const split_matrix& m, int split,
                                                                 std::int64_t num_elements);

}  // namespace mactor::data
