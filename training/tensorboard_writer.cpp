// TensorBoard event-file writer: TFRecord framing, masked CRC32C and the Event/Summary protos by hand.
#include "training/tensorboard_writer.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace mactor::training {

namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
    table[i] = c;
  }
  return table;
}

constexpr auto crc32c_table = make_crc32c_table();

// Protobuf wire format: varint, fixed64 (wire type 1), length-delimited (2), fixed32 (5).
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, std::uint32_t field, std::uint32_t wire_type) { put_varint(out, (field << 3) | wire_type); }

void put_fixed_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, std::uint32_t field, double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  put_tag(out, field, 1);
  put_fixed_le(out, bits, 8);
}

void put_float(std::string& out, std::uint32_t field, float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  put_tag(out, field, 5);
  put_fixed_le(out, bits, 4);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event{ double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5 }.
std::string event_header(double wall_time, std::int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {
    put_tag(event, 2, 0);
    put_varint(event, static_cast<std::uint64_t>(step));  // int64: negatives as 10-byte two's complement
  }
  return event;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = crc32c_table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

tensorboard_writer::tensorboard_writer(const std::string& directory) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec || !fs::is_directory(directory))
    throw std::runtime_error("--tensorboard-dir " + directory +
                             ": cannot create the log directory; pass a writable path to --tensorboard-dir");
  // <n> tells apart writers opened by one process in the same second (TensorFlow uses a global counter).
  static std::atomic<int> writers_opened{0};
  const auto seconds = static_cast<long long>(wall_time_now());
  path_ = (fs::path(directory) / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." +
                                  std::to_string(::getpid()) + "." + std::to_string(writers_opened++)))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr)
    throw std::runtime_error("tensorboard: cannot open the event file '" + path_ +
                             "' for writing; pass a writable path to --tensorboard-dir");
  std::string event = event_header(wall_time_now(), 0);
  put_bytes(event, 3, "brain.Event:2");
  write_record(event);
  flush();
}

tensorboard_writer::~tensorboard_writer() {
  if (file_ == nullptr) return;
  std::fflush(file_);
  std::fclose(file_);
}

void tensorboard_writer::add_scalar(const std::string& tag, double value, std::int64_t step, double wall_time) {
  // Summary{ repeated Value value = 1 }, Value{ string tag = 1; float simple_value = 2 }.
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_float(summary_value, 2, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  write_record(event);
}

void tensorboard_writer::add_text(const std::string& tag, const std::string& text, std::int64_t step,
                                  double wall_time) {
  // TensorProto{ dtype = 1 (DT_STRING = 7); tensor_shape = 2 { dim = 2 { size = 1 } }; string_val = 8 }.
  std::string dim;
  put_tag(dim, 1, 0);
  put_varint(dim, 1);
  std::string shape;
  put_bytes(shape, 2, dim);
  std::string tensor;
  put_tag(tensor, 1, 0);
  put_varint(tensor, 7);
  put_bytes(tensor, 2, shape);
  put_bytes(tensor, 8, text);
  // SummaryMetadata{ plugin_data = 1 { plugin_name = 1 } }; TextPluginData{version 0} serializes to nothing.
  std::string plugin_data;
  put_bytes(plugin_data, 1, "text");
  std::string metadata;
  put_bytes(metadata, 1, plugin_data);
  // Value{ tag = 1; tensor = 8; metadata = 9 }, in field order as protobuf serializes it.
  std::string summary_value;
  put_bytes(summary_value, 1, tag + "/text_summary");
  put_bytes(summary_value, 8, tensor);
  put_bytes(summary_value, 9, metadata);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  write_record(event);
}

void tensorboard_writer::flush() {
  if (std::fflush(file_) != 0)
    throw std::runtime_error("tensorboard: writing the event file '" + path_ + "' failed: " + std::strerror(errno));
}

void tensorboard_writer::write_record(std::string_view data) {
  // TFRecord: uint64 length, masked CRC32C of the length bytes, data, masked CRC32C of the data (all little-endian).
  std::string record;
  record.reserve(data.size() + 16);
  put_fixed_le(record, data.size(), 8);
  put_fixed_le(record, masked_crc32c(std::string_view(record.data(), 8)), 4);
  record.append(data);
  put_fixed_le(record, masked_crc32c(data), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw std::runtime_error("tensorboard: writing the event file '" + path_ + "' failed: " + std::strerror(errno));
}

}  // namespace mactor::training
