// Tags for point-to-point messages on a transport outside collectives: pipeline activations and
// gradients of different microbatches and model chunks, and checkpoint replicas, so none ever
// matches another or a collective's messages.
#pragma once

#include <cstdint>
#include <string>

#include "comm/transport.hpp"

namespace mactor::comm {

enum class p2p_kind : std::uint64_t { activation = 0, gradient = 1, checkpoint_replica = 2 };

inline constexpr int pipeline_chunk_bits = 8;        // up to 256 virtual stages per rank
inline constexpr int pipeline_microbatch_bits = 29;  // up to 2^29 microbatches per iteration
inline constexpr int p2p_kind_shift = pipeline_chunk_bits + pipeline_microbatch_bits;

/// kind (2 bits) | model chunk (8 bits) | microbatch (29 bits): 39 bits, below the collective
/// tags (bit 39). Sender and receiver compute the same tag; the transport adds the sender.
inline std::uint64_t pipeline_tag(p2p_kind kind, int model_chunk, int microbatch) {
  if (model_chunk < 0 || model_chunk >= (1 << pipeline_chunk_bits) || microbatch < 0 ||
      microbatch >= (1 << pipeline_microbatch_bits))
    throw comm_error(-1, "pipeline_tag: model chunk " + std::to_string(model_chunk) +
                             " or microbatch " + std::to_string(microbatch) +
                             " is out of range (chunks < 256, microbatches < 2^29)");
  return (static_cast<std::uint64_t>(kind) << p2p_kind_shift) |
         (static_cast<std::uint64_t>(model_chunk) << pipeline_microbatch_bits) |
         static_cast<std::uint64_t>(microbatch);
}

/// A checkpoint replica's message `part` (0: its size, 1: its bytes) for `iteration`: kind
/// checkpoint_replica | part (1 bit) | iteration modulo 2^36. Replicas of one pair of ranks are
/// exchanged one iteration at a time, so the modulo never makes two live messages match.
inline std::uint64_t checkpoint_replica_tag(std::int64_t iteration, int part) {
  constexpr int iteration_bits = p2p_kind_shift - 1;
  const auto it = static_cast<std::uint64_t>(iteration) & ((std::uint64_t{1} << iteration_bits) - 1);
  return (static_cast<std::uint64_t>(p2p_kind::checkpoint_replica) << p2p_kind_shift) |
         (static_cast<std::uint64_t>(part & 1) << iteration_bits) | it;
}

}  // namespace mactor::comm
