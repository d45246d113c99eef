// Packing a shard's model values and fp8 bytes into one all-gather payload.
#include "training/packed_param_gather.hpp"

#include <algorithm>
#include <cstring>

namespace mactor::training {

std::vector<gather_run> gather_runs(std::size_t begin, std::size_t end, std::size_t numel,
                                    std::span<const fp8_weight_place> fp8) {
  // Where flat element i of a model value is held: i less the fp8 elements before it.
  auto value_place = [&](std::size_t i) {
    std::size_t before = 0;
    for (const auto& w : fp8) before += std::min(w.numel, i > w.offset ? i - w.offset : 0);
    return i - before;
  };
  std::vector<gather_run> runs;
  end = std::min(end, numel);
  std::size_t at = begin;
  for (const auto& w : fp8) {
    if (at >= end) break;
    const std::size_t lo = std::max(w.offset, at), hi = std::min(w.offset + w.numel, end);
    if (lo >= hi) continue;
    if (at < lo) runs.push_back({at, lo, false, value_place(at)});
    runs.push_back({lo, hi, true, w.byte_offset + (lo - w.offset)});
    at = hi;
  }
  if (at < end) runs.push_back({at, end, false, value_place(at)});
  return runs;
}

std::size_t packed_bytes(std::span<const gather_run> runs, std::size_t value_size) {
  std::size_t n = 0;
  for (const auto& r : runs) n += (r.end - r.begin) * (r.fp8 ? 1 : value_size);
  return n;
}

void pack_runs(std::span<const gather_run> runs, tensor::const_tensor_view values, const std::uint8_t* fp8,
               std::byte* out) {
  const std::size_t size = tensor::size_of(values.type);
  const auto* base = static_cast<const std::byte*>(values.data);
  for (const auto& r : runs) {
    const std::size_t n = r.end - r.begin;
    if (r.fp8) {
      std::memcpy(out, fp8 + r.at, n);
      out += n;
    } else {
      std::memcpy(out, base + r.at * size, n * size);
      out += n * size;
    }
  }
}

void unpack_runs(std::span<const gather_run> runs, const std::byte* in, tensor::tensor_view values,
                 std::uint8_t* fp8) {
  const std::size_t size = tensor::size_of(values.type);
  auto* base = static_cast<std::byte*>(values.data);
  for (const auto& r : runs) {
    const std::size_t n = r.end - r.begin;
    if (r.fp8) {
      std::memcpy(fp8 + r.at, in, n);
      in += n;
    } else {
      std::memcpy(base + r.at * size, in, n * size);
      in += n * size;
    }
  }
}

}  // namespace mactor::training
