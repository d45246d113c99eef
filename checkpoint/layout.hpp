// Megatron's on-disk names: <save>/iter_0000100/ and <save>/latest_checkpointed_iteration.txt,
// plus this library's file names inside an iteration directory.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace mactor::checkpoint {

inline constexpr const char* tracker_file_name = "latest_checkpointed_iteration.txt";
inline constexpr const char* metadata_file_name = "metadata.json";
inline constexpr const char* common_file_name = "common.json";

/// "iter_0000100" (Megatron's 'iter_{:07d}').
std::string iteration_dir_name(std::int64_t iteration);
/// The iteration of a committed directory's name ("iter_" + digits); nullopt for anything else
/// (temporary and replaced directories of interrupted saves among them).
std::optional<std::int64_t> committed_iteration(const std::string& name);
std::filesystem::path iteration_dir(const std::filesystem::path& save_dir, std::int64_t iteration);
/// Where a save of `iteration` is assembled before its rename: iter_0000100.tmp[-<attempt>].
std::filesystem::path temporary_iteration_dir(const std::filesystem::path& save_dir,
                                              std::int64_t iteration, const std::string& attempt);
/// "__<rank>_0.distcp": the one shard file a rank writes.
std::string shard_file_name(int rank);
/// "__<rank>.done.json": the rank's piece index, written (atomically) after its shard is fsynced.
std::string done_marker_name(int rank);

/// The iteration the tracker names; nullopt when load_dir has no tracker. checkpoint_error when it
/// is garbled, or says "release" (release checkpoints are not supported).
std::optional<std::int64_t> read_tracker(const std::string& load_dir);
/// Replaces the tracker atomically (temporary file, fsync, rename, directory fsync).
void write_tracker(const std::string& save_dir, std::int64_t iteration);

/// Removes leftovers of interrupted saves (iter_*.tmp*, iter_*.old-*) under save_dir. Call it on
/// rank 0 before any rank starts saving in this job (e.g. at start-up); it never touches a
/// committed iter_XXXXXXX directory or the tracker. Returns how many entries it removed.
int remove_interrupted_saves(const std::string& save_dir);

}  // namespace mactor::checkpoint
