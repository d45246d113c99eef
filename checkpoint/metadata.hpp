// metadata.json: every tensor's global shape and every saved piece's slice, file, byte range and
// CRC-32, plus each shard file's size. Each rank's done marker holds the same document for its own
// pieces; rank 0 merges them into the iteration's metadata.json.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mactor::checkpoint {

inline constexpr const char* format_name = "mactor_torch_dist";
inline constexpr int format_version = 1;

struct piece_record {
  std::vector<std::int64_t> offset, shape;  // the nd slice in the global tensor
  std::optional<std::pair<std::int64_t, std::int64_t>> flat_range;  // within the row-major slice
  std::string file;                  // shard file name inside the iteration directory
  std::int64_t byte_offset = 0;      // where the piece's float32 little-endian data starts
  std::int64_t length = 0;           // bytes
  std::uint32_t crc32 = 0;           // of those bytes
};

struct tensor_record {
  std::string dtype = "float32";
  std::vector<std::int64_t> global_shape;
  std::vector<piece_record> pieces;
};

struct file_record {
  std::int64_t size = 0;  // bytes, header included
  int rank = 0;
};

struct checkpoint_metadata {
  std::int64_t iteration = 0;
  int world_size = 1;
  std::map<std::string, file_record> files;
  std::map<std::string, tensor_record> tensors;
};

nlohmann::json to_json(const checkpoint_metadata& m);
/// source names the file in errors (checkpoint_error) when the document is malformed.
checkpoint_metadata metadata_from_json(const nlohmann::json& j, const std::string& source);
/// Adds part's files and pieces to into. A piece identical in slice and range to one already held
/// (a replicated tensor saved by several ranks) is kept once; a different global shape for the
/// same name is a checkpoint_error.
void merge_metadata(checkpoint_metadata& into, const checkpoint_metadata& part);

}  // namespace mactor::checkpoint
