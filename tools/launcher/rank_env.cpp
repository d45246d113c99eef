// Builds each rank's environment.
#include "tools/launcher/rank_env.hpp"

#include <cstdlib>
#include <map>

namespace mactor::tools {

env_list rank_env(const job_layout& layout, const launch_options& opts, const job_identity& job,
                  int rank, const std::vector<int>& slot_of) {
  const int world = layout.world_size();
  const auto place = [&](int r) { return r < world && !slot_of.empty() ? slot_of.at(std::size_t(r)) : r; };
  const rank_placement& p = layout.ranks.at(place(rank));
  // A rank's local rank and size count the job's ranks on its host (spares and their places
  // left out); a spare's are its place's.
  int local_rank = p.local_rank, local_count = layout.local_size[p.host];
  if (rank < world && layout.processes() > world) {
    local_rank = local_count = 0;
    for (int other = 0; other < world; ++other)
      if (layout.ranks[place(other)].host == p.host) local_rank += other < rank, ++local_count;
  }
  std::string size = std::to_string(world);
  std::string r = std::to_string(rank);
  std::string local = std::to_string(local_rank);
  std::string local_size = std::to_string(local_count);
  std::string node = std::to_string(layout.node_rank[p.host]);
  const app_context& ctx = opts.contexts.at(p.context);
  int first_rank = 0;
  for (int c = 0; c < p.context; ++c) first_rank += opts.contexts[c].np;
  env_list e = {
      // Open MPI: NODE_RANK is the rank among this node's processes, not the node's index.
      {"OMPI_COMM_WORLD_SIZE", size},
      {"OMPI_COMM_WORLD_RANK", r},
      {"OMPI_COMM_WORLD_LOCAL_RANK", local},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", local_size},
      {"OMPI_COMM_WORLD_NODE_RANK", local},
      {"OMPI_UNIVERSE_SIZE", size},
      {"OMPI_APP_CTX_NUM_PROCS", std::to_string(ctx.np)},
      {"OMPI_NUM_APP_CTX", std::to_string(opts.contexts.size())},
      {"OMPI_FIRST_RANKS", std::to_string(first_rank)},
      // torchrun
      {"RANK", r},
      {"WORLD_SIZE", size},
      {"LOCAL_RANK", local},
      {"LOCAL_WORLD_SIZE", local_size},
      {"GROUP_RANK", node},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
      // mactor
      {"MACTOR_RANK", r},
      {"MACTOR_WORLD_SIZE", size},
      {"MACTOR_LOCAL_RANK", local},
      {"MACTOR_LOCAL_SIZE", local_size},
      {"MACTOR_NODE_RANK", node},
      {"MACTOR_RDZV_ADDR", job.rdzv_addr},
      {"MACTOR_JOB_ID", job.job_id},
      {"MACTOR_RESTART_COUNT", std::to_string(job.restart_count)},
  };
  if (!opts.device_memory.empty()) e.emplace_back("MACTOR_DEVICE_MEMORY", opts.device_memory);
  if (!opts.ft_section_timeouts.empty()) e.emplace_back("MACTOR_FT_RANK_SECTION_TIMEOUTS", opts.ft_section_timeouts);
  if (!opts.ft_out_of_section_timeout.empty())
    e.emplace_back("MACTOR_FT_RANK_OUT_OF_SECTION_TIMEOUT", opts.ft_out_of_section_timeout);
  for (auto& [name, value] : ctx.env) {
    if (value) {
      e.emplace_back(name, *value);
    } else if (const char* v = std::getenv(name.c_str())) {
      e.emplace_back(name, v);
    }
  }
  return e;
}

std::vector<std::string> merge_env(char** base, const env_list& overrides) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  for (char** p = base; p && *p; ++p) {
    std::string kv = *p;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    if (!vars.count(k)) order.push_back(k);
    vars[k] = kv.substr(eq + 1);
  }
  for (auto& [k, v] : overrides) {
    if (!vars.count(k)) order.push_back(k);
    vars[k] = v;
  }
  std::vector<std::string> out;
  for (auto& k : order) out.push_back(k + "=" + vars[k]);
  return out;
}

}  // namespace mactor::tools
