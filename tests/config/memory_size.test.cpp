// Memory sizes as mactor --device-memory takes them.
#include "config/memory_size.hpp"

#include <catch2/catch.hpp>

using mactor::config::parse_memory_size;

TEST_CASE("memory sizes read bytes or K M G T suffixes in binary units and nothing else") {
  CHECK(parse_memory_size("4096") == 4096);
  CHECK(parse_memory_size("4K") == 4096);
  CHECK(parse_memory_size("512M") == 512LL << 20);
  CHECK(parse_memory_size("1.5G") == 3LL << 29);
  CHECK(parse_memory_size("80g") == 80LL << 30);
  CHECK(parse_memory_size("1T") == 1LL << 40);
  for (const char* bad : {"", "M", "-1G", "0", "12X", "1.5GB", "inf", "nanG", " 1G"}) {
    INFO(bad);
    CHECK_FALSE(parse_memory_size(bad).has_value());
  }
}
