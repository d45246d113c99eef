// Stored zip: local headers, central directory, end record (ZIP64 end record and locator always,
// as torch writes them). Little-endian fields, version 45 (ZIP64) needed to extract.
#include "checkpoint/zip_archive.hpp"

#include <cstring>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/crc32.hpp"

namespace mactor::checkpoint {
namespace {

constexpr std::size_t alignment = 64;

void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get(std::string_view in, std::uint64_t at, int bytes, const std::string& where) {
  if (at + bytes > in.size()) throw checkpoint_error(where + " is truncated (zip record past the end); re-save it");
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

struct written {
  std::string name;
  std::uint64_t offset, size;
  std::uint32_t crc;
};

// ZIP64 extended information extra field with the sizes and (central) the local header offset.
std::string zip64_extra(std::uint64_t size, const std::uint64_t* offset) {
  std::string e;
  put(e, 1, 2);
  put(e, offset ? 24 : 16, 2);
  put(e, size, 8);
  put(e, size, 8);
  if (offset) put(e, *offset, 8);
  return e;
}

// Local header (ZIP64 sizes, 'FB' padding to the alignment), then the data.
written write_member(std::string& out, const zip_member& m) {
  written w{m.name, out.size(), m.data.size(), crc32(0, m.data.data(), m.data.size())};
  const std::string z64 = zip64_extra(w.size, nullptr);
  const std::size_t header = 30 + m.name.size() + z64.size();
  const std::size_t pad = (alignment - (out.size() + header + 4) % alignment) % alignment;
  put(out, 0x04034b50, 4);
  put(out, 45, 2);
  put(out, 0, 2);  // flags
  put(out, 0, 2);  // stored
  put(out, 0, 4);  // time, date
  put(out, w.crc, 4);
  put(out, 0xffffffff, 4);
  put(out, 0xffffffff, 4);
  put(out, m.name.size(), 2);
  put(out, z64.size() + 4 + pad, 2);
  out += m.name;
  out += z64;
  put(out, 0x4246, 2);
  put(out, pad, 2);
  out.append(pad, 'Z');
  out.append(m.data.data(), m.data.size());
  return w;
}

void write_central_record(std::string& out, const written& w) {
  const std::string z64 = zip64_extra(w.size, &w.offset);
  put(out, 0x02014b50, 4);
  put(out, 45, 2);  // made by
  put(out, 45, 2);  // needed
  put(out, 0, 2);
  put(out, 0, 2);
  put(out, 0, 4);
  put(out, w.crc, 4);
  put(out, 0xffffffff, 4);
  put(out, 0xffffffff, 4);
  put(out, w.name.size(), 2);
  put(out, z64.size(), 2);
  put(out, 0, 2);  // comment
  put(out, 0, 2);  // disk
  put(out, 0, 2);  // internal attributes
  put(out, 0, 4);  // external attributes
  put(out, 0xffffffff, 4);
  out += w.name;
  out += z64;
}

// ZIP64 end record, its locator, and the classic end record pointing at them.
void write_end_records(std::string& out, std::uint64_t count, std::uint64_t cd_start) {
  const std::uint64_t cd_size = out.size() - cd_start, z64_end = out.size();
  put(out, 0x06064b50, 4);
  put(out, 44, 8);
  put(out, 45, 2);
  put(out, 45, 2);
  put(out, 0, 4);
  put(out, 0, 4);
  put(out, count, 8);
  put(out, count, 8);
  put(out, cd_size, 8);
  put(out, cd_start, 8);
  put(out, 0x07064b50, 4);  // locator
  put(out, 0, 4);
  put(out, z64_end, 8);
  put(out, 1, 4);
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, 0xffff, 2);
  put(out, 0xffff, 2);
  put(out, 0xffffffff, 4);
  put(out, 0xffffffff, 4);
  put(out, 0, 2);
}

}  // namespace

std::string write_zip(const std::vector<zip_member>& members) {
  std::string out;
  std::vector<written> done;
  for (const auto& m : members) done.push_back(write_member(out, m));
  const std::uint64_t cd_start = out.size();
  for (const auto& w : done) write_central_record(out, w);
  write_end_records(out, done.size(), cd_start);
  return out;
}

zip_reader::zip_reader(std::string bytes, std::string where) : bytes_(std::move(bytes)), where_(std::move(where)) {
  const std::string_view in(bytes_);
  if (in.size() < 22) throw checkpoint_error(where_ + " is not a zip archive (too short); is it a torch checkpoint?");
  std::uint64_t eocd = in.size() - 22;
  const std::uint64_t lowest = in.size() > 22 + 65535 ? in.size() - 22 - 65535 : 0;
  while (get(in, eocd, 4, where_) != 0x06054b50) {
    if (eocd == lowest) throw checkpoint_error(where_ + " is not a zip archive (no end record); is it a torch checkpoint?");
    --eocd;
  }
  std::uint64_t count = get(in, eocd + 10, 2, where_);
  std::uint64_t cd_offset = get(in, eocd + 16, 4, where_);
  if ((count == 0xffff || cd_offset == 0xffffffff) && eocd >= 20 && get(in, eocd - 20, 4, where_) == 0x07064b50) {
    const std::uint64_t z = get(in, eocd - 12, 8, where_);
    if (get(in, z, 4, where_) != 0x06064b50) throw checkpoint_error(where_ + ": damaged ZIP64 end record; re-save it");
    count = get(in, z + 32, 8, where_);
    cd_offset = get(in, z + 48, 8, where_);
  }
  std::uint64_t at = cd_offset;
  for (std::uint64_t n = 0; n < count; ++n) {
    if (get(in, at, 4, where_) != 0x02014b50) throw checkpoint_error(where_ + ": damaged zip central directory; re-save it");
    if (get(in, at + 10, 2, where_) != 0)
      throw checkpoint_error(where_ + " holds compressed members; only stored (torch.save) archives are read");
    entry e;
    e.crc = static_cast<std::uint32_t>(get(in, at + 16, 4, where_));
    e.size = get(in, at + 24, 4, where_);
    const std::uint64_t compressed = get(in, at + 20, 4, where_);
    const std::uint64_t name_len = get(in, at + 28, 2, where_), extra_len = get(in, at + 30, 2, where_),
                        comment_len = get(in, at + 32, 2, where_);
    e.offset = get(in, at + 42, 4, where_);
    if (at + 46 + name_len > in.size()) throw checkpoint_error(where_ + " is truncated; re-save it");
    std::string name(in.substr(at + 46, name_len));
    // ZIP64 extra: the fields that are 0xffffffff follow in order (size, compressed, offset).
    for (std::uint64_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const std::uint64_t id = get(in, x, 2, where_), len = get(in, x + 2, 2, where_);
      if (id == 1) {
        std::uint64_t f = x + 4;
        if (e.size == 0xffffffff) e.size = get(in, f, 8, where_), f += 8;
        if (compressed == 0xffffffff) f += 8;
        if (e.offset == 0xffffffff) e.offset = get(in, f, 8, where_);
      }
      x += 4 + len;
    }
    // The local header's own name and extra lengths decide where the data starts.
    if (get(in, e.offset, 4, where_) != 0x04034b50) throw checkpoint_error(where_ + ": damaged zip member " + name + "; re-save it");
    e.offset += 30 + get(in, e.offset + 26, 2, where_) + get(in, e.offset + 28, 2, where_);
    if (e.offset + e.size > in.size()) throw checkpoint_error(where_ + " is truncated (member " + name + "); re-save it");
    index_[name] = e;
    at += 46 + name_len + extra_len + comment_len;
  }
}

std::vector<std::string> zip_reader::names() const {
  std::vector<std::string> out;
  for (const auto& [n, e] : index_) out.push_back(n);
  return out;
}

std::string_view zip_reader::member(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw checkpoint_error(where_ + " has no member " + name + "; is it a torch checkpoint?");
  const std::string_view data(bytes_.data() + it->second.offset, it->second.size);
  if (crc32(0, data.data(), data.size()) != it->second.crc)
    throw checkpoint_error(where_ + ": member " + name + " fails its CRC-32; the file is damaged, re-save it");
  return data;
}

}  // namespace mactor::checkpoint
