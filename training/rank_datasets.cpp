// One rank's datasets, built as Megatron's BlendedMegatronDatasetBuilder builds them across ranks:
// where an index cache applies (--data-cache-path, or the data's own cache folder), rank 0 builds
// the indices and writes the cache first, and the other ranks load it after a barrier (mapped,
// not built again, and not written again).
// Mock data has no cache folder in Megatron, and every rank builds its indices: millions of
// samples at short sequences, the largest share of a small job's startup when ranks share cores.
// Here a host's first rank builds them once into a folder of this job's in the temp directory,
// the host's other ranks load them, and the folder is removed once all have.
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "comm/launch_env.hpp"
#include "data/blended_dataset.hpp"
#include "data/data_error.hpp"
#include "training/model_spec.hpp"
#include "training/rank_worker.hpp"

namespace mactor::training {
namespace {

namespace fs = std::filesystem;

rank_datasets build_datasets(const config::megatron_args& a, const data::gpt_dataset_config& config) {
  const auto sizes = split_sample_counts(a);
  auto splits = data::build_gpt_datasets(config, sizes);
  if (!splits[0] && !a.validation.skip_train)
    throw std::runtime_error("the --split gives no training data; give the train split a weight");
  rank_datasets d{splits[0], splits[2], data::build_validation_sets(config, sizes[1])};
  if (d.valid.empty() && splits[1]) d.valid.push_back(splits[1]);
  check_full_validation_sets(a, d);
  return d;
}

// The folder a host's ranks share mock indices through: named by the user and the job (the
// launcher's job id and rendezvous address), so no other job's ranks meet it; nullopt when the
// launcher gives nothing that names the job.
std::optional<fs::path> job_index_folder() {
  const auto env = comm::detect_launch_env(comm::process_env());
  const std::string job = env.job_id + "|" + env.rdzv_addr + "|" + env.master_addr + ":" +
                          std::to_string(env.master_port);
  if (env.job_id.empty() && env.rdzv_addr.empty() && env.master_addr.empty()) return std::nullopt;
  std::error_code ec;
  const auto tmp = fs::temp_directory_path(ec);
  if (ec) return std::nullopt;
  // The node's index too: a temp directory several hosts share keeps one folder per host.
  return tmp / ("mactor-mock-indices-" + std::to_string(::getuid()) + "-" +
                std::to_string(std::hash<std::string>{}(job)) + "-node" + std::to_string(env.node_rank));
}

}  // namespace

rank_datasets datasets_from_args(const config::megatron_args& a, const data::tokenizer& tok, parallel_context& ctx) {
  auto config = dataset_config_from_args(a, tok);
  comm::communicator* world = ctx.world();
  if (!world || ctx.world_size() == 1) return build_datasets(a, config);
  const bool user_cache = config.path_to_cache && !config.path_to_cache->empty();
  const auto shared = config.mock && !user_cache ? job_index_folder() : std::nullopt;
  // Mock data with no folder to share through: every rank builds its own at once, as in Megatron.
  if (config.mock && !user_cache && !shared) return build_datasets(a, config);
  // Mock data through the job's folder: each host's first rank builds; otherwise rank 0.
  const bool builds_first = shared ? ctx.local_rank() == 0 : ctx.rank() == 0;
  if (shared) {
    config.path_to_cache = shared->string();
    if (builds_first) {
      std::error_code ec;
      fs::remove_all(*shared, ec);  // an earlier attempt of this job (a restart) may have left one
    }
  }
  std::optional<rank_datasets> built;
  if (builds_first) {
    config.write_cache = true;
    built = build_datasets(a, config);
  }
  world->barrier();
  if (!builds_first) {
    config.write_cache = false;
    built = build_datasets(a, config);
  }
  if (shared) {
    world->barrier();  // every rank has loaded its indices: the files can go
    if (builds_first) {
      std::error_code ec;
      fs::remove_all(*shared, ec);
    }
  }
  return std::move(*built);
}

}  // namespace mactor::training
