// POSIX file writing that survives a crash: full writes, fsync of files and of the directories that
// name them, and replace-by-rename. Every failure is a checkpoint_error naming the path.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace mactor::checkpoint {

/// A file opened for writing (created or truncated); close() fsyncs it before closing.
class durable_file {
 public:
  explicit durable_file(const std::filesystem::path& path);
  ~durable_file();  // closes without fsync when close() was not reached (an error path)
  durable_file(const durable_file&) = delete;
  durable_file& operator=(const durable_file&) = delete;

  void write(const void* data, std::size_t size);
  void close();  // fsync + close; throws on failure
  std::size_t bytes_written() const { return written_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::size_t written_ = 0;
};

/// fsync of a directory, so that entries created or renamed in it are durable.
void fsync_directory(const std::filesystem::path& dir);
/// Writes content to a temporary sibling, fsyncs it, renames it over path and fsyncs the directory:
/// a reader sees either the old file or the whole new one.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);
/// The whole file as bytes; checkpoint_error naming it when it cannot be read.
std::string read_whole_file(const std::filesystem::path& path);

}  // namespace mactor::checkpoint
