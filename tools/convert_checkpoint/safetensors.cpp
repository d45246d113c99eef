// safetensors writer and reader (https://github.com/huggingface/safetensors, "Format" section).
#include "tools/convert_checkpoint/safetensors.hpp"

#include <bit>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mactor::convert {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  std::uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
  if (exp == 0x1F) bits = sign | 0x7F800000u | (mant << 13);
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0) bits = sign;
  else {  // subnormal: normalize
    exp = 113;
    while (!(mant & 0x400)) mant <<= 1, --exp;
    bits = sign | (exp << 23) | ((mant & 0x3FF) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

void write_safetensors(const std::string& path, const tensor_map& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (n != std::int64_t(t.data.size()))
      throw std::runtime_error("safetensors: tensor " + name + " has " +
                               std::to_string(t.data.size()) + " values for its shape");
    const std::uint64_t bytes = t.data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t size = text.size();
  out.write(reinterpret_cast<const char*>(&size), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const auto& [name, t] : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size() * 4));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path + " (check the disk and --out)");
}

tensor_map read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + "; check --hf");
  std::uint64_t size = 0;
  in.read(reinterpret_cast<char*>(&size), 8);
  if (!in || size > (std::uint64_t(100) << 20))
    throw std::runtime_error(path + " is not a safetensors file (bad header size)");
  std::string text(size, '\0');
  in.read(text.data(), std::streamsize(size));
  const auto header = nlohmann::json::parse(text, nullptr, false);
  if (!in || header.is_discarded() || !header.is_object())
    throw std::runtime_error(path + " is not a safetensors file (bad JSON header)");
  const std::uint64_t base = 8 + size;
  tensor_map out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = info.at("dtype").get<std::string>();
    const auto begin = info.at("data_offsets").at(0).get<std::uint64_t>();
    const auto end = info.at("data_offsets").at(1).get<std::uint64_t>();
    dense_tensor t;
    t.shape = info.at("shape").get<std::vector<std::int64_t>>();
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    const std::size_t width = dtype == "F32" ? 4 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
    if (width == 0)
      throw std::runtime_error(path + ": tensor " + name + " has dtype " + dtype +
                               "; only F32, F16 and BF16 are supported");
    if (end - begin != std::uint64_t(n) * width)
      throw std::runtime_error(path + ": tensor " + name + "'s byte range does not match its shape");
    std::vector<char> raw(end - begin);
    in.seekg(std::streamoff(base + begin));
    in.read(raw.data(), std::streamsize(raw.size()));
    if (!in) throw std::runtime_error(path + " is truncated (tensor " + name + ")");
    t.data.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) {
      if (width == 4) {
        std::memcpy(&t.data[i], raw.data() + 4 * i, 4);
        continue;
      }
      std::uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      t.data[i] = dtype == "BF16" ? std::bit_cast<float>(std::uint32_t(h) << 16) : half_to_float(h);
    }
    out[name] = std::move(t);
  }
  return out;
}

}  // namespace mactor::convert
