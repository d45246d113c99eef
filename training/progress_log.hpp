// --log-progress: Megatron's progress.txt in the --save directory: a "Starting job" line when a
// job starts and, after each persistent save, the job's and the cumulative throughput since the
// first job of this world size, the model FLOPs and the tokens trained so far.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mactor::training {

/// One line: local time, $SLURM_JOB_ID, world size, text (tab-separated, as Megatron writes it).
std::string progress_line(std::chrono::system_clock::time_point now, const std::string& job_id, std::int64_t world_size,
                          const std::string& text);

/// Megatron's get_start_time_from_progress_log over the file's text: when the earliest job of
/// this world size (since the last job of another size) started, and the FLOPs of the last
/// "Saved checkpoint" before it. Throws std::runtime_error when there is no such start.
struct progress_start {
  std::chrono::system_clock::time_point time;
  double floating_point_operations = 0;
};
progress_start progress_start_of(const std::string& file_text, std::int64_t world_size);

/// The text of the line after a save (Megatron's compute_throughputs_and_append_to_progress_log).
struct saved_progress {
  std::int64_t iteration = 0;
  bool async_save = false;
  double floating_point_operations = 0;           ///< so far, checkpoints before this job included
  double floating_point_operations_at_start = 0;  ///< when this job started
  double job_seconds = 0;                         ///< since this job started
  double cumulative_seconds = 0;                  ///< since the first job of this world size
  double cumulative_start_operations = 0;         ///< FLOPs when that job started
  std::int64_t world_size = 1;
  std::int64_t tokens = 0;                        ///< consumed samples x sequence length
};
std::string saved_progress_text(const saved_progress& p);

/// Appends `line` to <save_dir>/progress.txt (created with its folder when absent).
void append_progress(const std::string& save_dir, const std::string& line);
/// The text of <save_dir>/progress.txt (empty when absent), for progress_start_of.
std::string read_progress(const std::string& save_dir);

}  // namespace mactor::training
