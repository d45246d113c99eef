// CRC-32 (IEEE 802.3, zlib's and Python's zlib.crc32), slice-by-8 in software so checkpoint/ needs
// no compression library; incremental, so shards are checksummed while they are written.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mactor::checkpoint {

/// Continues crc over size bytes (start with crc = 0); crc32(crc32(0, a), b) == crc32(0, a + b).
std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t size);

}  // namespace mactor::checkpoint
