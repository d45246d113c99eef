// A micro-batch of uniformly random tokens and labels with every position counted, the input the
// training-step benchmarks feed the model (the same draw for the same seed and sizes).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/gpt_chunk.hpp"

namespace mactor::bench {

struct random_batch {
  std::vector<std::int32_t> tokens, labels;
  std::vector<float> mask;
  int batch = 1;

  random_batch(int micro_batch_size, int seq, int vocab, unsigned seed = 0)
      : tokens(std::size_t(micro_batch_size) * seq), labels(tokens.size()), mask(tokens.size(), 1.0f),
        batch(micro_batch_size) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> token(0, vocab - 1);
    for (auto& t : tokens) t = token(rng);
    for (auto& t : labels) t = token(rng);
  }
  model::micro_batch view() const { return {tokens.data(), labels.data(), mask.data(), nullptr, batch}; }
};

}  // namespace mactor::bench
