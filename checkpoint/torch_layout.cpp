// torch-format file names and format detection.
#include "checkpoint/torch_layout.hpp"

#include <cstdio>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/layout.hpp"

namespace mactor::checkpoint {
namespace fs = std::filesystem;

std::string torch_rank_file(int tp_rank, int pp_rank, bool pipeline_parallel) {
  char name[64];
  if (pipeline_parallel) std::snprintf(name, sizeof name, "mp_rank_%02d_%03d", tp_rank, pp_rank);
  else std::snprintf(name, sizeof name, "mp_rank_%02d", tp_rank);
  return std::string(name) + "/model_optim_rng.pt";
}

std::string torch_distrib_optim_file(const std::string& rank_file) {
  return (fs::path(rank_file).parent_path() / "distrib_optim.pt").string();
}

stored_format detect_format(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw checkpoint_error(dir.string() + " does not exist; the tracker names an iteration that is missing");
  if (fs::exists(dir / metadata_file_name, ec)) return stored_format::torch_dist;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("mp_rank_0", 0) == 0) return stored_format::torch;
  throw checkpoint_error("unknown checkpoint format in " + dir.string() +
                         " (neither metadata.json of torch_dist nor mp_rank_* of torch); check --load");
}

const char* to_string(stored_format f) { return f == stored_format::torch ? "torch" : "torch_dist"; }

}  // namespace mactor::checkpoint
