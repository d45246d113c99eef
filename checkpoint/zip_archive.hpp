// Stored (uncompressed) zip archives, the container of PyTorch's serialization: a writer that
// aligns every member's data to 64 bytes as torch's own writer does (an 'FB' padding extra field),
// and a reader of any stored-only archive, ZIP64 included (torch writes ZIP64 records).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mactor::checkpoint {

struct zip_member {
  std::string name;
  std::string_view data;
};

/// The archive's bytes. Members over 4 GiB are written with ZIP64 sizes.
std::string write_zip(const std::vector<zip_member>& members);

/// A zip archive held in memory; members are views into it.
class zip_reader {
 public:
  /// Parses the central directory; `where` names the file in errors. Throws checkpoint_error on
  /// a damaged archive, a compressed member or a CRC mismatch (checked on member()).
  zip_reader(std::string bytes, std::string where);
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  /// The member's bytes (CRC-checked); throws checkpoint_error naming it when absent.
  std::string_view member(const std::string& name) const;

 private:
  struct entry {
    std::uint64_t offset = 0, size = 0;
    std::uint32_t crc = 0;
  };
  std::string bytes_, where_;
  std::map<std::string, entry> index_;
};

}  // namespace mactor::checkpoint
