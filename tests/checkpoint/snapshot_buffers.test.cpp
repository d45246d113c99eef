// Recycled snapshot buffers: a capture after a written snapshot copies into that snapshot's
// memory, the values are the new ones, and the pool never holds more than one snapshot.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "checkpoint/snapshot_buffers.hpp"

using mactor::checkpoint::rank_state;
using mactor::checkpoint::snapshot_buffers;
using mactor::checkpoint::tensor_piece;

namespace {

// A snapshot of pieces of the given sizes, element i of piece k being first + 1000 k + i.
rank_state snapshot(snapshot_buffers& buffers, const std::vector<std::size_t>& sizes, float first) {
  rank_state state;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::vector<float> source(sizes[k]);
    std::iota(source.begin(), source.end(), first + 1000.0f * static_cast<float>(k));
    tensor_piece p;
    p.name = "t" + std::to_string(k);
    p.data = buffers.copy(source.data(), source.size());
    state.pieces.push_back(std::move(p));
  }
  return state;
}

bool holds(const rank_state& state, float first) {
  for (std::size_t k = 0; k < state.pieces.size(); ++k)
    for (std::size_t i = 0; i < state.pieces[k].data.size(); ++i)
      if (state.pieces[k].data[i] != first + 1000.0f * static_cast<float>(k) + static_cast<float>(i)) return false;
  return true;
}

}  // namespace

TEST_CASE("a snapshot after a written one copies into its buffers, with the new values", "[checkpoint][snapshot]") {
  snapshot_buffers buffers;
  auto first = snapshot(buffers, {5, 7, 5}, 1.0f);
  CHECK(holds(first, 1.0f));
  CHECK(buffers.allocated() == 3);
  CHECK(buffers.reused() == 0);
  std::vector<const float*> memory;
  for (const auto& p : first.pieces) memory.push_back(p.data.data());

  buffers.give_back(first);
  CHECK(buffers.free_bytes() == 17 * static_cast<std::int64_t>(sizeof(float)));
  for (const auto& p : first.pieces) CHECK(p.data.empty());

  auto second = snapshot(buffers, {5, 7, 5}, 50.0f);
  CHECK(holds(second, 50.0f));
  CHECK(buffers.reused() == 3);
  CHECK(buffers.allocated() == 3);
  CHECK(buffers.free_bytes() == 0);
  // The size-7 piece got the size-7 buffer; the two of size 5 got the two of size 5.
  CHECK(second.pieces[1].data.data() == memory[1]);
  CHECK(((second.pieces[0].data.data() == memory[0] && second.pieces[2].data.data() == memory[2]) ||
         (second.pieces[0].data.data() == memory[2] && second.pieces[2].data.data() == memory[0])));

  // A size the pool does not hold is a new buffer.
  auto other = snapshot(buffers, {9}, 3.0f);
  CHECK(holds(other, 3.0f));
  CHECK(buffers.allocated() == 4);
}

TEST_CASE("the snapshot pool holds at most the last written snapshot's buffers", "[checkpoint][snapshot]") {
  snapshot_buffers buffers;
  auto a = snapshot(buffers, {4, 4}, 0.0f);
  auto b = snapshot(buffers, {16}, 0.0f);
  buffers.give_back(a);
  CHECK(buffers.free_bytes() == 8 * static_cast<std::int64_t>(sizeof(float)));
  buffers.give_back(b);  // a's buffers, never taken, are freed
  CHECK(buffers.free_bytes() == 16 * static_cast<std::int64_t>(sizeof(float)));
  auto c = snapshot(buffers, {4}, 2.0f);
  CHECK(buffers.reused() == 0);
  CHECK(holds(c, 2.0f));
}
