// Tags for pipeline point-to-point messages on a transport, so activations and gradients of
// different microbatches and model chunks never match each other or a collective's messages.
#pragma once

#include <cstdint>
#include <string>

#include "comm/transport.hpp"

namespace mactor::comm {

enum class p2p_kind : std::uint64_t { activation = 0, gradient = 1 };

inline constexpr int pipeline_chunk_bits = 8;        // up to 256 virtual stages per rank
inline constexpr int pipeline_microbatch_bits = 30;  // up to 2^30 microbatches per iteration

/// kind (1 bit) | model chunk (8 bits) | microbatch (30 bits): 39 bits, below the collective
/// tags (bit 39). Sender and receiver compute the same tag; the transport adds the sender.
inline std::uint64_t pipeline_tag(p2p_kind kind, int model_chunk, int microbatch) {
  if (model_chunk < 0 || model_chunk >= (1 << pipeline_chunk_bits) || microbatch < 0 ||
      microbatch >= (1 << pipeline_microbatch_bits))
    throw comm_error(-1, "pipeline_tag: model chunk " + std::to_string(model_chunk) +
                             " or microbatch " + std::to_string(microbatch) +
                             " is out of range (chunks < 256, microbatches < 2^30)");
  return (static_cast<std::uint64_t>(kind) << (pipeline_chunk_bits + pipeline_microbatch_bits)) |
         (static_cast<std::uint64_t>(model_chunk) << pipeline_microbatch_bits) |
         static_cast<std::uint64_t>(microbatch);
}

}  // namespace mactor::comm
