// PyTorch's file format (torch.save since 1.6): a stored zip of archive/data.pkl (a protocol-2
// pickle whose tensors refer to storages by persistent id), archive/data/<key> (each storage's
// raw little-endian bytes), archive/byteorder and archive/version.
#pragma once
#include <filesystem>
#include <string>

#include "checkpoint/pickle_value.hpp"

namespace mactor::checkpoint {

/// The file's bytes for `root`; every tensor gets a storage of its own.
std::string torch_save_bytes(const pickle_value& root);
/// Reads a torch.save file; throws checkpoint_error naming it when it is not one or is damaged.
pickle_value torch_load(const std::filesystem::path& file);
/// The pickle alone (protocol 2), tensors referring to storages "0", "1", ... in tree order.
std::string pickle_bytes(const pickle_value& root);

}  // namespace mactor::checkpoint
