// Megatron's fp32 main parameters of a 16-bit model (its Float16OptimizerWithFloat16Params, or
// the distributed optimizer's fp32 shards): the optimizer updates fp32 copies of the bf16/fp16
// model weights, and after each step the updated part is rounded into the model. One fp32 flat
// buffer per chunk, laid out as the chunk's value buffer was when the copy was made (the whole
// layout, or a fully sharded shard); the value buffer may later drop the fp8 weights, whose
// main parameters stay here. An fp32 model has no copy: its main parameters are the model
// values themselves.
#pragma once

#include <cstddef>
#include <vector>

#include "model/gpt_chunk.hpp"
#include "tensor/tensor.hpp"

namespace mactor::training {

class main_params {
 public:
  /// Widens each 16-bit chunk's values into its fp32 copy (the chunks must outlive this).
  explicit main_params(std::vector<model::gpt_chunk>& chunks);

  /// True when the model is 16-bit and the main parameters are a copy.
  bool separate() const { return !copies_.empty(); }
  /// Chunk c's fp32 main parameter at flat element `flat` (the model's own value for an fp32
  /// model), in the model's device memory (the copy lives beside the values), which this rank must hold (throws std::logic_error otherwise); the rest of its held
  /// range follows it. With fully sharded parameters only the store's shard is held.
  float* value_at(std::size_t c, std::size_t flat);
  /// The parts of chunk c's flat elements [begin, end) this rank holds (all of them unless the
  /// parameters are sharded), each with its main parameters.
  struct held_part {
    std::size_t begin = 0, end = 0;
    float* values = nullptr;  // on the model's device
  };
  std::vector<held_part> held(std::size_t c, std::size_t begin, std::size_t end);
  /// Rounds the held part of flat elements [begin, end) of chunk c's main parameters into the
  /// model's values (after the optimizer updated them), where the values hold them (not the fp8
  /// weights); nothing for an fp32 model.
  void copy_to_model(std::size_t c, std::size_t begin, std::size_t end);
  /// The same for every chunk's whole buffer (after a checkpoint load into the main parameters).
  void copy_all_to_model();
  /// Widens the model's 16-bit values into the main parameters (Megatron's reload_model_params
  /// after a load without optimizer state), where the values hold them; nothing for an fp32 model.
  void copy_all_from_model();
  /// Chunk c's model weights widened to fp32, in the flat layout: what the model computes with.
  /// With the distributed optimizer only this rank's shard of the main parameters is current, the
  /// weights all are (the values unsharded). Elements the values do not hold (fp8 weights) are 0.
  std::vector<float> model_values(std::size_t c) const;

 private:
  // Calls f(values_at, copy_at, n) for each run of flat elements [begin, end) that both the
  // model's values and the copy hold, with each one's place.
  template <class F>
  void for_each_shared(std::size_t c, std::size_t begin, std::size_t end, F f) const;

  std::vector<model::gpt_chunk>& chunks_;
  std::vector<tensor::tensor> copies_;  // per chunk, fp32, when separate
  std::vector<std::vector<model::held_range>> layouts_;  // per copy: what it holds, where
};

}  // namespace mactor::training
