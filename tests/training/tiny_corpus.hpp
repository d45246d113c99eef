// Test data for the training tests: a small Megatron indexed dataset (.bin/.idx) of short
// documents, each ending in the NullTokenizer's EOD, written with data/'s builder.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/indexed_dataset.hpp"

namespace mactor::test {

/// Writes `prefix`.bin/.idx: `documents` documents of 3..40 tokens below `tokens` (8000), then `eod`.
inline void write_tiny_corpus(const std::string& prefix, int documents = 2000, std::int64_t eod = 8192,
                              std::int64_t tokens = 8000) {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> length(3, 40);
  std::uniform_int_distribution<std::int64_t> token(0, tokens - 1);
  data::indexed_dataset_builder builder(prefix + ".bin");
  for (int d = 0; d < documents; ++d) {
    std::vector<std::int64_t> doc(static_cast<std::size_t>(length(rng)));
    for (auto& t : doc) t = token(rng);
    doc.push_back(eod);
    const std::int32_t lengths[] = {static_cast<std::int32_t>(doc.size())};
    builder.add_document(doc, lengths);
  }
  builder.finalize(prefix + ".idx");
}

}  // namespace mactor::test
