// Opens one saved iteration, checks it, and fills any requested slice or flat range of any tensor
// from whatever pieces were saved under whatever layout (resharding on load).
#pragma once
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/metadata.hpp"
#include "checkpoint/tensor_piece.hpp"
#include "checkpoint/tensor_source.hpp"

namespace mactor::checkpoint {

class checkpoint_reader final : public tensor_source {
 public:
  /// Opens <load_dir>/iter_XXXXXXX of `iteration`, or of the tracker's iteration when nullopt.
  /// Reads metadata.json and common.json and checks that every shard file is present with the
  /// recorded size and header; throws checkpoint_error naming the file and the fix otherwise.
  /// cache_bytes: verified pieces kept in memory, so neighbouring requests read a piece once.
  explicit checkpoint_reader(const std::string& load_dir,
                             std::optional<std::int64_t> iteration = std::nullopt,
                             std::size_t cache_bytes = std::size_t(256) << 20);
  ~checkpoint_reader();
  checkpoint_reader(const checkpoint_reader&) = delete;
  checkpoint_reader& operator=(const checkpoint_reader&) = delete;

  std::int64_t iteration() const { return meta_.iteration; }
  const std::filesystem::path& directory() const { return dir_; }
  const nlohmann::json& common() const { return common_; }
  const checkpoint_metadata& metadata() const { return meta_; }
  std::vector<std::string> names() const override;
  bool has(const std::string& name) const override { return meta_.tensors.count(name) > 0; }
  /// checkpoint_error when the tensor is absent.
  std::vector<std::int64_t> global_shape(const std::string& name) const override;

  /// Resizes req.data and fills it with req's slice (and flat range) of tensor req.name. Every
  /// saved piece it touches is checksummed. Errors name the tensor and the first missing element.
  /// Safe to call from several threads.
  void read(tensor_piece& req) const override;
  /// The whole tensor, row-major.
  std::vector<float> read_whole(const std::string& name) const;
  /// Checksums every piece of every tensor (reads the whole checkpoint).
  void verify_all() const;

 private:
  using piece_data = std::shared_ptr<const std::vector<float>>;
  piece_data load_piece(const std::string& tensor, const piece_record& p, bool use_cache) const;
  int file_descriptor(const std::string& file) const;
  void check_files() const;

  std::filesystem::path dir_;
  checkpoint_metadata meta_;
  nlohmann::json common_;
  std::size_t cache_limit_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, int> fds_;
  mutable std::map<std::pair<std::string, std::int64_t>, piece_data> cache_;
  mutable std::list<std::pair<std::string, std::int64_t>> cache_order_;
  mutable std::size_t cache_size_ = 0;
};

}  // namespace mactor::checkpoint
