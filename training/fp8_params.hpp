// --fp8-param-gather: the model's fp8-GEMM weights held as fp8 (Transformer Engine's fp8
// primary weights under Megatron's fp8_model_init). Each chunk keeps one byte per element of
// those weights and a scale_inv per weight, and its 16-bit value buffer no longer holds them
// (half their memory under bf16); the linears multiply the fp8 values directly. After
// each optimizer step every rank casts its shard of the fp32 main parameters to fp8 as TE's
// cast_master_weights_to_fp8 does (the main value first rounded to the model's dtype, as TE
// does "for numerical consistency"): the delayed recipe quantizes with the weight's current
// scale and records the shard's amax into its history, the amaxes max-reduced over the shard
// group; current scaling (tensorwise) max-reduces the amax first and quantizes every shard with
// the scale of the whole weight. The parameter all-gather then moves these bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.hpp"
#include "model/gpt_chunk.hpp"
#include "tensor/tensor.hpp"
#include "training/main_params.hpp"

namespace mactor::training {

class fp8_params {
 public:
  /// One fp8 weight of a chunk: its place in the chunk's flat buffers and in its byte buffer.
  struct weight {
    std::size_t offset = 0, numel = 0, byte_offset = 0;
    model::fp8_linear* linear = nullptr;
    float scale_inv = 1.0f;
  };
  /// A flat range [begin, end) of one chunk's buffers.
  struct range {
    std::size_t begin = 0, end = 0;
  };

  /// Finds each chunk's fp8-GEMM weights, points their linears at the fp8 bytes, casts the
  /// (whole) main parameters once, as the model is built with fp8 weights, and drops those
  /// weights' slots from the chunk's value buffer (parameter_store::drop_values). The chunks and
  /// main parameters must outlive this (and not move).
  fp8_params(std::vector<model::gpt_chunk>& chunks, main_params& main);
  fp8_params(const fp8_params&) = delete;
  fp8_params& operator=(const fp8_params&) = delete;

  const std::vector<weight>& weights(std::size_t chunk) const { return weights_[chunk]; }
  /// Chunk c's fp8 bytes (the weights in flat order, one byte per element).
  std::uint8_t* bytes(std::size_t chunk);
  /// Bytes of fp8 weights held by this rank.
  std::size_t nbytes() const;

  /// After the optimizer step: casts elements `ranges[c]` of each chunk's main parameters (this
  /// rank's shard: one range per region, a weight lying in one) to fp8; the amaxes are
  /// max-reduced over `group` (null: this rank alone). Every member of `group` calls it with its
  /// own ranges.
  void cast(const std::vector<std::vector<range>>& ranges, comm::communicator* group);
  /// The same for the whole of every chunk, on one rank (at start and after a checkpoint load).
  void cast_all();
  /// Writes each fp8 weight of chunk c, dequantized (what the GEMMs multiply), at its place in
  /// `flat` (a whole flat layout of the chunk).
  void dequantize_into(std::size_t c, std::span<float> flat);
  /// Megatron's reload_model_params for an fp8 weight: its main parameters become the fp8
  /// values it holds (after a load without optimizer state).
  void dequantize_into_main();

 private:
  // The piece of weight w inside the ranges (at most one meets it), as flat [lo, hi), empty when none.
  static range piece(const weight& w, const std::vector<range>& ranges);
  tensor::const_tensor_view model_dtype_piece(std::size_t c, const range& p);
  std::vector<float> local_amaxes(const std::vector<std::vector<range>>& ranges);
  void quantize_piece(std::size_t c, const weight& w, const range& p, float scale);

  std::vector<model::gpt_chunk>& chunks_;
  main_params& main_;
  std::vector<std::vector<weight>> weights_;
  std::vector<tensor::tensor> bytes_;  // per chunk, fp8 e4m3
  tensor::tensor scratch_;             // a piece of main parameters in the model's dtype
};

}  // namespace mactor::training
