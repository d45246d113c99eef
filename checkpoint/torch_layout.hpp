// Megatron's --ckpt-format torch names: iter_0000100/mp_rank_TT[_PPP]/model_optim_rng.pt, one file
// per tensor- and pipeline-parallel rank, and how Megatron tells the two formats apart on load.
#pragma once
#include <filesystem>
#include <string>

namespace mactor::checkpoint {

/// "mp_rank_01/model_optim_rng.pt", or "mp_rank_01_002/model_optim_rng.pt" with pipeline
/// parallelism (Megatron's get_checkpoint_name).
std::string torch_rank_file(int tp_rank, int pp_rank, bool pipeline_parallel);
/// The distributed optimizer's file beside a rank's model file: "mp_rank_01/distrib_optim.pt"
/// (Megatron's get_distributed_optimizer_checkpoint_name).
std::string torch_distrib_optim_file(const std::string& rank_file);

enum class stored_format { torch_dist, torch };
/// Megatron's _get_checkpoint_format: torch_dist when the iteration directory has the
/// distributed checkpoint's metadata, torch when an entry starts with "mp_rank_0"; else
/// checkpoint_error naming the directory.
stored_format detect_format(const std::filesystem::path& iteration_dir);
const char* to_string(stored_format f);

}  // namespace mactor::checkpoint
