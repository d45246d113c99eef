// The save protocol: shard + fsync, per-rank done marker (atomic), then on rank 0 wait, merge,
// metadata + common, fsync, rename the directory into place, update the tracker atomically.
#include "checkpoint/save.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/crc32.hpp"
#include "checkpoint/durable_file.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/metadata.hpp"

namespace mactor::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr char shard_magic[8] = {'M', 'A', 'C', 'T', 'O', 'R', 'C', 'K'};
constexpr std::size_t write_chunk_bytes = std::size_t(8) << 20;

void check_arguments(std::int64_t iteration, int rank, int world_size, const rank_state& state) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw checkpoint_error("save: rank " + std::to_string(rank) + " is outside world size " +
                           std::to_string(world_size));
  if (iteration < 0)
    throw checkpoint_error("save: iteration " + std::to_string(iteration) + " is negative");
  if (rank == 0 && !state.common && !state.files)
    throw checkpoint_error("save: rank 0 must pass the common document (iteration, args, ...)");
  for (const auto& p : state.pieces) validate_piece(p, true);
}

// Writes the shard file and returns this rank's index of it.
checkpoint_metadata write_shard(const fs::path& dir, std::int64_t iteration, int rank,
                                int world_size, const rank_state& state) {
  checkpoint_metadata index;
  index.iteration = iteration;
  index.world_size = world_size;
  const std::string file = shard_file_name(rank);
  durable_file out(dir / file);
  std::uint32_t header[2] = {std::uint32_t(format_version), std::uint32_t(rank)};
  out.write(shard_magic, sizeof shard_magic);
  out.write(header, sizeof header);
  for (const auto& p : state.pieces) {
    piece_record r{p.offset, p.shape, p.flat_range, file, std::int64_t(out.bytes_written()),
                   std::int64_t(p.data.size() * sizeof(float)), 0};
    const char* bytes = reinterpret_cast<const char*>(p.data.data());
    for (std::size_t done = 0; done < std::size_t(r.length);) {
      const std::size_t n = std::min(write_chunk_bytes, std::size_t(r.length) - done);
      r.crc32 = crc32(r.crc32, bytes + done, n);
      out.write(bytes + done, n);
      done += n;
    }
    auto [it, fresh] = index.tensors.try_emplace(p.name);
    if (fresh) it->second.global_shape = p.global_shape;
    else if (it->second.global_shape != p.global_shape)
      throw checkpoint_error("save: rank " + std::to_string(rank) + " passed pieces of " + p.name +
                             " with different global shapes");
    it->second.pieces.push_back(std::move(r));
  }
  index.files[file] = {std::int64_t(out.bytes_written()), rank};
  out.close();
  return index;
}

// --ckpt-format torch: the rank's files (often none), each fsynced; its index lists no tensors.
void write_rank_file(const fs::path& dir, const std::pair<std::string, std::string>& file) {
  const fs::path path = dir / file.first;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw checkpoint_error("cannot create " + path.parent_path().string() + ": " + ec.message());
  durable_file out(path);
  for (std::size_t done = 0; done < file.second.size();) {
    const std::size_t n = std::min(write_chunk_bytes, file.second.size() - done);
    out.write(file.second.data() + done, n);
    done += n;
  }
  out.close();
  fsync_directory(path.parent_path());
}

checkpoint_metadata write_rank_files(const fs::path& dir, std::int64_t iteration, int world_size,
                                     const std::vector<std::pair<std::string, std::string>>& files) {
  checkpoint_metadata index;
  index.iteration = iteration;
  index.world_size = world_size;
  for (const auto& f : files) write_rank_file(dir, f);
  return index;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size() && i < 16; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return ranks.size() > 16 ? s + ", ... (" + std::to_string(ranks.size()) + " in all)" : s;
}

// Rank 0: polls for every rank's done marker and merges their indexes.
checkpoint_metadata gather_indexes(const fs::path& dir, std::int64_t iteration, int world_size,
                                   const save_options& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.commit_timeout;
  auto pause = std::chrono::milliseconds(2);
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int r = 0; r < world_size; ++r)
      if (!fs::exists(dir / done_marker_name(r))) missing.push_back(r);
    if (missing.empty()) break;
    if (std::chrono::steady_clock::now() > deadline)
      throw checkpoint_error(
          "save of iteration " + std::to_string(iteration) + ": rank(s) " + rank_list(missing) +
          " did not finish writing to " + dir.string() + " within " +
          std::to_string(options.commit_timeout.count() / 1000.0) +
          " s; check those ranks' logs (the previous checkpoint is untouched)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  checkpoint_metadata all;
  all.iteration = iteration;
  all.world_size = world_size;
  for (int r = 0; r < world_size; ++r) {
    const fs::path marker = dir / done_marker_name(r);
    const auto part = metadata_from_json(nlohmann::json::parse(read_whole_file(marker), nullptr,
                                                               false), marker.string());
    if (part.iteration != iteration || part.world_size != world_size)
      throw checkpoint_error(marker.string() + " is from iteration " +
                             std::to_string(part.iteration) + " with world size " +
                             std::to_string(part.world_size) + ", not iteration " +
                             std::to_string(iteration) + " with world size " +
                             std::to_string(world_size) + "; every rank must save the same step");
    merge_metadata(all, part);
  }
  return all;
}

void write_json_file(const fs::path& path, const nlohmann::json& j) {
  const std::string text = j.dump(1);
  durable_file f(path);
  f.write(text.data(), text.size());
  f.close();
}

// Rank 0, once all shards are durable: the iteration becomes visible, then the tracker names it.
void commit(const fs::path& save_dir, const fs::path& tmp, std::int64_t iteration,
            const checkpoint_metadata& all, const nlohmann::json* common,
            const save_options& options) {
  if (common) {  // torch_dist; a torch-format iteration is its per-rank files alone
    write_json_file(tmp / metadata_file_name, to_json(all));
    write_json_file(tmp / common_file_name, *common);
  }
  for (int r = 0; r < all.world_size; ++r) fs::remove(tmp / done_marker_name(r));
  fsync_directory(tmp);
  const fs::path final_dir = iteration_dir(save_dir, iteration);
  std::error_code ec;
  fs::path old;
  if (fs::exists(final_dir, ec)) {  // re-saving an iteration: move the old copy aside first
    old = final_dir;
    old += ".old-" + (options.attempt_id.empty() ? std::string("x") : options.attempt_id) + "-" +
           std::to_string(::getpid());
    if (std::rename(final_dir.c_str(), old.c_str()) != 0)
      throw checkpoint_error("cannot move the existing " + final_dir.string() + " aside: " +
                             std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), final_dir.c_str()) != 0)
    throw checkpoint_error("cannot rename " + tmp.string() + " to " + final_dir.string() + ": " +
                           std::strerror(errno));
  fsync_directory(save_dir);
  std::optional<std::int64_t> previous;
  if (options.retain_interval) previous = read_tracker(save_dir.string());
  write_tracker(save_dir.string(), iteration);
  if (!old.empty()) fs::remove_all(old, ec);
  // Megatron's save_retain_interval: the checkpoint the tracker named before goes, once the new
  // one is tracked, unless the interval keeps it (or it is a link the user made).
  if (previous && *previous > 0 && *previous != iteration && *previous % *options.retain_interval != 0) {
    const fs::path previous_dir = iteration_dir(save_dir, *previous);
    if (!fs::is_symlink(previous_dir, ec) && fs::remove_all(previous_dir, ec) > 0 && !ec && options.on_deleted)
      options.on_deleted(*previous);
  }
}

}  // namespace

void save(const std::string& save_dir, std::int64_t iteration, int rank, int world_size,
          const rank_state& state, const save_options& options) {
  check_arguments(iteration, rank, world_size, state);
  const fs::path root(save_dir);
  const fs::path tmp = temporary_iteration_dir(root, iteration, options.attempt_id);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec)
    throw checkpoint_error("cannot create the checkpoint directory " + tmp.string() + ": " +
                           ec.message() + "; check --save and its permissions");
  fs::remove(tmp / done_marker_name(rank), ec);  // this rank's leftovers of an earlier attempt
  if (options.before_write) options.before_write();
  const checkpoint_metadata index = state.files ? write_rank_files(tmp, iteration, world_size, *state.files)
                                               : write_shard(tmp, iteration, rank, world_size, state);
  write_file_atomically(tmp / done_marker_name(rank), to_json(index).dump());
  if (rank != 0) return;
  const checkpoint_metadata all = gather_indexes(tmp, iteration, world_size, options);
  commit(root, tmp, iteration, all, state.files ? nullptr : &*state.common, options);
}

}  // namespace mactor::checkpoint
