// Megatron's --memory-snapshot-path: the recorded memory history (tensor/memory_history.hpp)
// written as the dict torch.cuda.memory._snapshot() returns, pickled, so PyTorch's memory viewer
// (https://pytorch.org/memory_viz) opens it: "segments" (each live or cached block, its state and
// what holds it) and "device_traces" (every alloc and free, oldest first). The "frames" of a
// block name its memory kind (parameters, gradients, optimizer state, activations, ...).
#pragma once
#include <filesystem>
#include <string>

namespace mactor::training {

/// The snapshot's pickle bytes.
std::string memory_snapshot_pickle();
/// Writes memory_snapshot_pickle() to `path` through a temporary file renamed into place; throws
/// std::runtime_error naming the path when it cannot.
void write_memory_snapshot(const std::filesystem::path& path);

}  // namespace mactor::training
