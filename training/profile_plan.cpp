// --profile's window, ranks and file, as Megatron's training loop and torch.profiler give them.
#include "training/profile_plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_error.hpp"

namespace mactor::training {

profile_plan profile_plan_of(const config::megatron_args& a, int rank, int pp, int tp, int dp) {
  const auto& t = a.training;
  profile_plan p;
  p.rank = rank;
  p.enabled = t.profile && std::find(t.profile_ranks.begin(), t.profile_ranks.end(), rank) != t.profile_ranks.end();
  if (t.use_pytorch_profiler) {
    p.first = std::max<std::int64_t>(t.profile_step_start, 1);
    p.last = t.profile_step_end - 1;
  } else {
    p.first = t.profile_step_start + 1;
    p.last = t.profile_step_end;
  }
  p.folder = t.tensorboard_dir.value_or("");
  p.process_name = "rank " + std::to_string(rank) + " (pp " + std::to_string(pp) + ", tp " + std::to_string(tp) +
                   ", dp " + std::to_string(dp) + ")";
  return p;
}

std::string profile_plan::file_path() const {
  if (folder.empty()) return "mactor_trace_rank" + std::to_string(rank) + ".json";
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  return (std::filesystem::path(folder) / ("rank" + std::to_string(rank) + "." + std::to_string(ns) + ".pt.trace.json"))
      .string();
}

void prepare_profile_folder(const profile_plan& plan) {
  if (!plan.enabled) return;
  namespace fs = std::filesystem;
  const fs::path folder = plan.folder.empty() ? fs::current_path() : fs::path(plan.folder);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (!ec && fs::is_directory(folder) && access(folder.c_str(), W_OK) == 0) return;
  const std::string why = ec ? " (" + ec.message() + ")" : std::string();
  if (plan.folder.empty())
    throw checkpoint::checkpoint_error("--profile: the current folder " + folder.string() + " is not writable" + why +
                                       "; run from a writable folder or pass --tensorboard-dir");
  throw checkpoint::checkpoint_error("--profile: --tensorboard-dir " + plan.folder +
                                     " is not a folder that can be created and written" + why +
                                     "; pass a writable path to --tensorboard-dir");
}

}  // namespace mactor::training
