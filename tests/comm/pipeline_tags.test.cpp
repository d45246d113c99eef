// Pipeline tags: distinct for every (kind, chunk, microbatch) and clear of collective tags.
#include "comm/pipeline_tags.hpp"

#include <catch2/catch.hpp>
#include <set>

#include "comm/collectives.hpp"

using namespace mactor::comm;

TEST_CASE("pipeline and replica tags are distinct per kind, chunk and microbatch and avoid collective tags") {
  std::set<std::uint64_t> seen;
  for (std::int64_t it : {0, 1, 40, 1000000})
    for (int part : {0, 1}) {
      const std::uint64_t tag = checkpoint_replica_tag(it, part);
      CHECK(seen.insert(tag).second);
      CHECK((tag & collective_tag_bit) == 0);
    }
  for (auto kind : {p2p_kind::activation, p2p_kind::gradient})
    for (int chunk : {0, 1, 2, 255})
      for (int mb : {0, 1, 7, 1000, (1 << 29) - 1}) {
        const std::uint64_t tag = pipeline_tag(kind, chunk, mb);
        CHECK(seen.insert(tag).second);
        CHECK((tag & collective_tag_bit) == 0);
        CHECK(tag <= max_tag);
      }
  CHECK_THROWS_WITH(pipeline_tag(p2p_kind::activation, 256, 0), Catch::Contains("model chunk 256"));
  CHECK_THROWS_AS(pipeline_tag(p2p_kind::gradient, 0, -1), comm_error);
}
