// A rank's parameters as checkpoint pieces: each tensor-parallel (or expert-tensor-parallel)
// shard as slices of its global tensor, any range of it (a distributed-optimizer shard) as pieces,
// and the names and messages the checkpoint code gives them. See checkpoint/README.md
// ("Expressing model/ shards as pieces").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/snapshot_buffers.hpp"
#include "checkpoint/tensor_piece.hpp"
#include "config/megatron_args.hpp"
#include "model/parameter.hpp"

namespace mactor::training {

/// Pieces covering elements [begin, end) of p's local tensor, p split as rank t of tp, with
/// data from `local` (indexed from the local tensor's start); `local` may be null for load requests.
/// `buffers`: where the data is copied (recycled buffers; null: fresh ones).
std::vector<checkpoint::tensor_piece> pieces_of(const std::string& name, const model::parameter& p, int t, int tp,
                                                std::size_t begin, std::size_t end, const float* local,
                                                checkpoint::snapshot_buffers* buffers = nullptr);
/// "[a, b, c]".
std::string shape_text(const std::vector<std::int64_t>& shape);
/// Why a saved tensor of shape `saved` does not fit p, and what to change.
std::string shape_mismatch(const std::string& where, const model::parameter& p, const std::vector<std::int64_t>& saved,
                           const nlohmann::json& common, const config::megatron_args& a, int tp);
/// A whole 1-d fp32 buffer (a MoE router's expert bias) as one piece; data left empty for a load.
checkpoint::tensor_piece buffer_piece(const std::string& name, std::size_t n, const float* data);
/// Megatron's name of an optimizer state tensor of a parameter.
std::string optimizer_name(const std::string& state, const std::string& param);

}  // namespace mactor::training
