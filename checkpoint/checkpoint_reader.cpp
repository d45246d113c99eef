// checkpoint_reader: open + check files, then per request load (checksummed, cached) the pieces
// that overlap and hand them to copy_slices.
#include "checkpoint/checkpoint_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/crc32.hpp"
#include "checkpoint/durable_file.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/slice_copy.hpp"

namespace mactor::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string dims(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

nlohmann::json read_json(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw checkpoint_error("checkpoint " + what + " " + path.string() + " is missing; " +
                           damaged_checkpoint_fix);
  auto j = nlohmann::json::parse(read_whole_file(path), nullptr, false);
  if (j.is_discarded())
    throw checkpoint_error("checkpoint " + what + " " + path.string() + " is not valid JSON; " +
                           damaged_checkpoint_fix);
  return j;
}

// 0-d tensors are handled as shape [1].
const std::vector<std::int64_t>& at_least_1d(const std::vector<std::int64_t>& v) {
  static const std::vector<std::int64_t> one{1};
  return v.empty() ? one : v;
}
const std::vector<std::int64_t>& offset_at_least_1d(const std::vector<std::int64_t>& v) {
  static const std::vector<std::int64_t> zero{0};
  return v.empty() ? zero : v;
}

}  // namespace

checkpoint_reader::checkpoint_reader(const std::string& load_dir,
                                     std::optional<std::int64_t> iteration,
                                     std::size_t cache_bytes)
    : cache_limit_(cache_bytes) {
  if (!iteration) {
    iteration = read_tracker(load_dir);
    if (!iteration)
      throw checkpoint_error("no checkpoint in " + load_dir + ": " +
                             (fs::path(load_dir) / tracker_file_name).string() +
                             " is missing; check --load, or pass --ckpt-step N");
  }
  dir_ = iteration_dir(load_dir, *iteration);
  std::error_code ec;
  if (!fs::is_directory(dir_, ec))
    throw checkpoint_error("checkpoint directory " + dir_.string() + " for iteration " +
                           std::to_string(*iteration) + " is missing; " + damaged_checkpoint_fix);
  const fs::path meta_path = dir_ / metadata_file_name;
  meta_ = metadata_from_json(read_json(meta_path, "metadata"), meta_path.string());
  common_ = read_json(dir_ / common_file_name, "common document");
  check_files();
}

checkpoint_reader::~checkpoint_reader() {
  for (auto& [name, fd] : fds_) ::close(fd);
}

void checkpoint_reader::check_files() const {
  for (const auto& [name, f] : meta_.files) {
    const fs::path path = dir_ / name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      throw checkpoint_error("checkpoint file " + path.string() + " (rank " +
                             std::to_string(f.rank) + "'s shard) is missing; " +
                             damaged_checkpoint_fix);
    if (st.st_size != f.size)
      throw checkpoint_error("checkpoint file " + path.string() + " is " +
                             (st.st_size < f.size ? "truncated" : "longer than recorded") + " (" +
                             std::to_string(st.st_size) + " bytes, metadata says " +
                             std::to_string(f.size) + "); " + damaged_checkpoint_fix);
    char header[16];
    if (::pread(file_descriptor(name), header, sizeof header, 0) != sizeof header ||
        std::memcmp(header, "MACTORCK", 8) != 0)
      throw checkpoint_error("checkpoint file " + path.string() +
                             " does not start with a mactor shard header; " +
                             damaged_checkpoint_fix);
  }
  for (const auto& [name, t] : meta_.tensors)
    for (const auto& p : t.pieces)
      if (!meta_.files.count(p.file) || p.byte_offset < 16 ||
          p.byte_offset + p.length > meta_.files.at(p.file).size)
        throw checkpoint_error((dir_ / metadata_file_name).string() + ": a piece of " + name +
                               " lies outside its file " + p.file + "; " + damaged_checkpoint_fix);
}

int checkpoint_reader::file_descriptor(const std::string& file) const {
  std::lock_guard lock(mutex_);
  auto it = fds_.find(file);
  if (it != fds_.end()) return it->second;
  const fs::path path = dir_ / file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw checkpoint_error("cannot open checkpoint file " + path.string() + ": " +
                           std::strerror(errno) + "; " + damaged_checkpoint_fix);
  fds_[file] = fd;
  return fd;
}

std::vector<std::string> checkpoint_reader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : meta_.tensors) out.push_back(name);
  return out;
}

std::vector<std::int64_t> checkpoint_reader::global_shape(const std::string& name) const {
  auto it = meta_.tensors.find(name);
  if (it == meta_.tensors.end())
    throw checkpoint_error("checkpoint " + dir_.string() + " has no tensor \"" + name +
                           "\"; was it saved under another name or by a different model?");
  return it->second.global_shape;
}

checkpoint_reader::piece_data checkpoint_reader::load_piece(const std::string& tensor,
                                                            const piece_record& p,
                                                            bool use_cache) const {
  const auto key = std::make_pair(p.file, p.byte_offset);
  if (use_cache) {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  const fs::path path = dir_ / p.file;
  auto data = std::make_shared<std::vector<float>>(std::size_t(p.length) / sizeof(float));
  const int fd = file_descriptor(p.file);
  char* out = reinterpret_cast<char*>(data->data());
  for (std::int64_t done = 0; done < p.length;) {
    const ssize_t n = ::pread(fd, out + done, std::size_t(p.length - done), p.byte_offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw checkpoint_error("checkpoint file " + path.string() + " is truncated or unreadable at byte " +
                             std::to_string(p.byte_offset + done) + " (tensor " + tensor + "); " +
                             damaged_checkpoint_fix);
    done += n;
  }
  const std::uint32_t crc = crc32(0, out, std::size_t(p.length));
  if (crc != p.crc32)
    throw checkpoint_error("checkpoint file " + path.string() + " is damaged: the piece of " +
                           tensor + " at bytes [" + std::to_string(p.byte_offset) + ", " +
                           std::to_string(p.byte_offset + p.length) + ") fails its CRC-32 check; " +
                           damaged_checkpoint_fix);
  if (use_cache && std::size_t(p.length) <= cache_limit_) {
    std::lock_guard lock(mutex_);
    if (cache_.emplace(key, data).second) {
      cache_order_.push_back(key);
      cache_size_ += std::size_t(p.length);
    }
    while (cache_size_ > cache_limit_ && !cache_order_.empty()) {
      auto old = cache_.find(cache_order_.front());
      cache_size_ -= old->second->size() * sizeof(float);
      cache_.erase(old);
      cache_order_.pop_front();
    }
  }
  return data;
}

void checkpoint_reader::read(tensor_piece& req) const {
  validate_piece(req, false);
  global_shape(req.name);  // throws naming the tensor when it was not saved
  const tensor_record& record = meta_.tensors.at(req.name);
  if (record.global_shape != req.global_shape)
    throw checkpoint_error("tensor " + req.name + " was saved with global shape " +
                           dims(record.global_shape) + " but is loaded as " +
                           dims(req.global_shape) + "; the model config differs from the saved one");
  req.data.assign(std::size_t(piece_elements(req)), 0.0f);
  const slice_view want{offset_at_least_1d(req.offset), at_least_1d(req.shape), req.flat_range};
  std::vector<piece_data> held;
  std::vector<source_slice> sources;
  for (const auto& p : record.pieces) {
    const slice_view have{offset_at_least_1d(p.offset), at_least_1d(p.shape), p.flat_range};
    if (!may_overlap(want, have)) continue;
    held.push_back(load_piece(req.name, p, true));
    sources.push_back({have, held.back()->data()});
  }
  if (auto missing = copy_slices(want, req.data.data(), sources))
    throw checkpoint_error("checkpoint " + dir_.string() + ": no saved piece of " + req.name +
                           " holds element " + dims(*missing) + " of the requested slice (offset " +
                           dims(req.offset) + ", shape " + dims(req.shape) +
                           "); the checkpoint is incomplete: " + damaged_checkpoint_fix);
}

std::vector<float> checkpoint_reader::read_whole(const std::string& name) const {
  tensor_piece req = whole_tensor(name, global_shape(name));
  read(req);
  return std::move(req.data);
}

void checkpoint_reader::verify_all() const {
  for (const auto& [name, t] : meta_.tensors)
    for (const auto& p : t.pieces) load_piece(name, p, false);
}

}  // namespace mactor::checkpoint
