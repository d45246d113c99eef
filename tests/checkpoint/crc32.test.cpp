// CRC-32 against the standard check value and Python's zlib.crc32 on known inputs.
#include "checkpoint/crc32.hpp"

#include <catch2/catch.hpp>

#include <string>

TEST_CASE("crc32 gives the IEEE check value and continues across split inputs") {
  const std::string check = "123456789";
  CHECK(mactor::checkpoint::crc32(0, check.data(), check.size()) == 0xCBF43926u);
  // python3 -c "import zlib; print(hex(zlib.crc32(b'The quick brown fox jumps over the lazy dog')))"
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  CHECK(mactor::checkpoint::crc32(0, fox.data(), fox.size()) == 0x414fa339u);
  const auto first = mactor::checkpoint::crc32(0, fox.data(), 13);
  CHECK(mactor::checkpoint::crc32(first, fox.data() + 13, fox.size() - 13) == 0x414fa339u);
  CHECK(mactor::checkpoint::crc32(0, nullptr, 0) == 0u);
}
