// TensorBoard event files (events.out.tfevents.*) written without TensorFlow or protobuf: TFRecord
// framing with masked CRC32C around hand-encoded Event protos, scalars as Summary.Value.simple_value.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mactor::training {

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`, as TFRecord uses it.
std::uint32_t crc32c(std::string_view data);

/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view data);

/// Seconds since the Unix epoch, with sub-second precision (an Event's wall_time).
double wall_time_now();

/// One TensorBoard event file in `directory`, named as TensorFlow names them:
/// events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>. The first record is the
/// file_version event "brain.Event:2". Scalars are written as torch.utils.tensorboard's
/// add_scalar writes them (float simple_value), which is what Megatron's training_log uses.
class tensorboard_writer {
 public:
  /// Creates `directory` (and its parents) when missing; throws std::runtime_error naming the path
  /// when it cannot be created or the event file cannot be opened.
  explicit tensorboard_writer(const std::string& directory);
  ~tensorboard_writer();  // flushes and closes

  tensorboard_writer(const tensorboard_writer&) = delete;
  tensorboard_writer& operator=(const tensorboard_writer&) = delete;

  /// One scalar point `value` (stored as float32) for `tag` at `step`.
  void add_scalar(const std::string& tag, double value, std::int64_t step, double wall_time = wall_time_now());

  /// One text point as torch.utils.tensorboard's add_text writes it (and so Megatron's
  /// write_args_to_tensorboard): tag `tag + "/text_summary"`, a DT_STRING tensor of shape [1] holding
  /// `text`, plugin "text".
  void add_text(const std::string& tag, const std::string& text, std::int64_t step, double wall_time = wall_time_now());

  /// Pushes buffered records to the file; throws std::runtime_error naming the file on a write error.
  void flush();

  /// The full path of the event file.
  const std::string& path() const { return path_; }

 private:
  void write_record(std::string_view data);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mactor::training
