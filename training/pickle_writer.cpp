// Pickle opcodes (Python's Lib/pickle.py names): PROTO 2, MARK-bracketed SETITEMS / APPENDS /
// TUPLE, BINUNICODE strings, BININT1 / BININT / LONG1 integers, NEWTRUE / NEWFALSE, NONE, STOP.
#include "training/pickle_writer.hpp"

namespace mactor::training {
namespace {
constexpr char proto = '\x80', mark = '(', stop = '.', empty_dict = '}', setitems = 'u',
               empty_list = ']', appends = 'e', tuple = 't', binunicode = 'X', binint1 = 'K',
               binint = 'J', long1_op = '\x8a', newtrue = '\x88', newfalse = '\x89', none_op = 'N';

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
}  // namespace

pickle_writer::pickle_writer() {
  out_ += proto;
  out_ += '\x02';
}

pickle_writer& pickle_writer::begin_dict() {
  out_ += empty_dict;
  out_ += mark;
  return *this;
}
pickle_writer& pickle_writer::end_dict() {
  out_ += setitems;
  return *this;
}
pickle_writer& pickle_writer::begin_list() {
  out_ += empty_list;
  out_ += mark;
  return *this;
}
pickle_writer& pickle_writer::end_list() {
  out_ += appends;
  return *this;
}
pickle_writer& pickle_writer::begin_tuple() {
  out_ += mark;
  return *this;
}
pickle_writer& pickle_writer::end_tuple() {
  out_ += tuple;
  return *this;
}

pickle_writer& pickle_writer::text(std::string_view s) {
  out_ += binunicode;
  put_le(out_, s.size(), 4);
  out_ += s;
  return *this;
}

pickle_writer& pickle_writer::integer(std::int64_t v) {
  if (v >= 0 && v < 256) {
    out_ += binint1;
    out_ += static_cast<char>(v);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_ += binint;
    put_le(out_, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
  } else {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(std::uint64_t(v) >> (8 * i));
    long1(bytes, 8);  // two's complement, so negative values keep their sign
  }
  return *this;
}

pickle_writer& pickle_writer::unsigned_integer(std::uint64_t v) {
  if (v <= std::uint64_t(INT64_MAX)) return integer(std::int64_t(v));
  unsigned char bytes[9] = {};  // a ninth zero byte keeps the top bit from reading as a sign
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  long1(bytes, 9);
  return *this;
}

void pickle_writer::long1(const unsigned char* little_endian, int n) {
  out_ += long1_op;
  out_ += static_cast<char>(n);
  out_.append(reinterpret_cast<const char*>(little_endian), std::size_t(n));
}

pickle_writer& pickle_writer::boolean(bool v) {
  out_ += v ? newtrue : newfalse;
  return *this;
}

pickle_writer& pickle_writer::none() {
  out_ += none_op;
  return *this;
}

std::string pickle_writer::finish() {
  out_ += stop;
  return std::move(out_);
}

}  // namespace mactor::training
