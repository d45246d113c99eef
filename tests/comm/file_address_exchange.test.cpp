// File-based address exchange: round trip, and a missing rank named after the timeout.
#include "comm/file_address_exchange.hpp"

#include <catch2/catch.hpp>

#include "multi_process.hpp"

using namespace mactor::comm;

TEST_CASE("a published address is fetched byte for byte") {
  testing::temp_dir dir;
  file_address_exchange ex(dir.path);
  const std::vector<std::byte> address{std::byte{0}, std::byte{255}, std::byte{10}, std::byte{13}};
  ex.publish(3, address);
  CHECK(ex.fetch(3, std::chrono::milliseconds(100)) == address);
}

TEST_CASE("a rank that never publishes is named after the timeout") {
  testing::temp_dir dir;
  file_address_exchange ex(dir.path);
  try {
    ex.fetch(5, std::chrono::milliseconds(50));
    FAIL("fetch returned without an address");
  } catch (const comm_error& e) {
    CHECK(e.rank() == 5);
    CHECK_THAT(e.what(), Catch::Contains("rank 5 did not publish"));
  }
  CHECK_THROWS_WITH(file_address_exchange(dir.path / "missing"), Catch::Contains("does not exist"));
}
