// Rank discovery from launcher variables; see launch_env.hpp for the order in which launchers win.
#include "comm/launch_env.hpp"

#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace mactor::comm {
namespace {

// Reads an integer variable; throws naming it when it is set but not a whole number >= min.
std::optional<int> read_int(const env_getter& get, const char* name, int min = 0) {
  auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE || x < min || x > 1 << 30)
    throw launch_env_error(std::string("environment variable ") + name + "='" + *v +
                           "' is not a whole number >= " + std::to_string(min) +
                           "; unset it or fix the launcher that set it");
  return static_cast<int>(x);
}

int require_int(const env_getter& get, const char* name, const char* because, int min = 0) {
  auto v = read_int(get, name, min);
  if (!v)
    throw launch_env_error(std::string("environment variable ") + name + " is not set, but " +
                           because + " is; a launcher sets both, so set it or unset the other");
  return *v;
}

std::string str_or_empty(const env_getter& get, const char* name) {
  auto v = get(name);
  return v ? *v : std::string();
}

// Slurm's "2(x3),1" lists tasks per node; returns the count for node `node_id`.
std::optional<int> slurm_tasks_on_node(const std::string& spec, int node_id) {
  int node = 0;
  size_t i = 0;
  while (i < spec.size()) {
    size_t comma = spec.find(',', i);
    std::string item = spec.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    int count = std::atoi(item.c_str());
    int repeat = 1;
    if (auto x = item.find("(x"); x != std::string::npos) repeat = std::atoi(item.c_str() + x + 2);
    if (count <= 0 || repeat <= 0) return std::nullopt;
    if (node_id < node + repeat) return count;
    node += repeat;
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return std::nullopt;
}

void check_consistent(const launch_env& e, const char* rank_var, const char* size_var) {
  if (e.world_size < 1 || e.rank >= e.world_size)
    throw launch_env_error(std::string(rank_var) + "=" + std::to_string(e.rank) + " is not below " +
                           size_var + "=" + std::to_string(e.world_size) +
                           "; the launcher's variables disagree, unset stale ones");
  if (e.local_world_size < 1 || e.local_rank >= e.local_world_size ||
      e.local_world_size > e.world_size)
    throw launch_env_error("local rank " + std::to_string(e.local_rank) + " of local size " +
                           std::to_string(e.local_world_size) + " does not fit world size " +
                           std::to_string(e.world_size) + " (from " + rank_var +
                           "); unset stale launcher variables");
}

void read_master(const env_getter& get, launch_env& e) {
  e.master_addr = str_or_empty(get, "MASTER_ADDR");
  e.master_port = read_int(get, "MASTER_PORT", 1).value_or(0);
}

launch_env from_mactor(const env_getter& get) {
  launch_env e;
  e.launcher = launcher_kind::mactor;
  e.rank = require_int(get, "MACTOR_RANK", "MACTOR_WORLD_SIZE");
  e.world_size = require_int(get, "MACTOR_WORLD_SIZE", "MACTOR_RANK", 1);
  e.local_rank = read_int(get, "MACTOR_LOCAL_RANK").value_or(e.rank);
  e.local_world_size = read_int(get, "MACTOR_LOCAL_SIZE", 1).value_or(e.world_size);
  e.node_rank = read_int(get, "MACTOR_NODE_RANK").value_or(0);
  e.rdzv_addr = str_or_empty(get, "MACTOR_RDZV_ADDR");
  e.job_id = str_or_empty(get, "MACTOR_JOB_ID");
  read_master(get, e);
  check_consistent(e, "MACTOR_RANK", "MACTOR_WORLD_SIZE");
  return e;
}

launch_env from_open_mpi(const env_getter& get) {
  launch_env e;
  e.launcher = launcher_kind::open_mpi;
  e.rank = require_int(get, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  e.world_size = require_int(get, "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", 1);
  e.local_rank = read_int(get, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(e.rank);
  e.local_world_size = read_int(get, "OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(e.world_size);
  // Open MPI has no node index (its NODE_RANK is a per-node rank). Its default by-slot mapping
  // puts each node's ranks in one block, so the block index is the node index.
  if (read_int(get, "OMPI_MCA_orte_num_nodes", 1).value_or(1) > 1)
    e.node_rank = (e.rank - e.local_rank) / e.local_world_size;
  e.job_id = str_or_empty(get, "OMPI_MCA_ess_base_jobid");
  e.rdzv_addr = str_or_empty(get, "MACTOR_RDZV_ADDR");
  read_master(get, e);
  check_consistent(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  return e;
}

launch_env from_torchrun(const env_getter& get) {
  launch_env e;
  e.launcher = launcher_kind::torchrun;
  e.rank = require_int(get, "RANK", "WORLD_SIZE");
  e.world_size = require_int(get, "WORLD_SIZE", "RANK", 1);
  e.local_rank = read_int(get, "LOCAL_RANK").value_or(e.rank);
  e.local_world_size = read_int(get, "LOCAL_WORLD_SIZE", 1).value_or(e.world_size);
  e.node_rank = read_int(get, "GROUP_RANK").value_or(0);
  e.job_id = str_or_empty(get, "TORCHELASTIC_RUN_ID");
  e.rdzv_addr = str_or_empty(get, "MACTOR_RDZV_ADDR");
  read_master(get, e);
  check_consistent(e, "RANK", "WORLD_SIZE");
  return e;
}

launch_env from_slurm(const env_getter& get) {
  launch_env e;
  e.launcher = launcher_kind::slurm;
  e.rank = require_int(get, "SLURM_PROCID", "SLURM_NTASKS");
  e.world_size = read_int(get, "SLURM_NTASKS", 1).value_or(0);
  if (e.world_size == 0) e.world_size = require_int(get, "SLURM_NPROCS", "SLURM_PROCID", 1);
  e.local_rank = read_int(get, "SLURM_LOCALID").value_or(0);
  e.node_rank = read_int(get, "SLURM_NODEID").value_or(0);
  e.local_world_size = e.world_size;
  for (const char* var : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto spec = get(var)) {
      auto n = slurm_tasks_on_node(*spec, e.node_rank);
      if (!n)
        throw launch_env_error(std::string(var) + "='" + *spec + "' has no entry for node " +
                               std::to_string(e.node_rank) + " (SLURM_NODEID); run under srun");
      e.local_world_size = *n;
      break;
    }
  }
  e.job_id = str_or_empty(get, "SLURM_JOB_ID");
  e.rdzv_addr = str_or_empty(get, "MACTOR_RDZV_ADDR");
  read_master(get, e);
  check_consistent(e, "SLURM_PROCID", "SLURM_NTASKS");
  return e;
}

launch_env from_pmi(const env_getter& get) {
  launch_env e;
  e.launcher = launcher_kind::pmi;
  e.rank = require_int(get, "PMI_RANK", "PMI_SIZE");
  e.world_size = require_int(get, "PMI_SIZE", "PMI_RANK", 1);
  e.local_rank = read_int(get, "MPI_LOCALRANKID").value_or(e.rank);
  e.local_world_size = read_int(get, "MPI_LOCALNRANKS", 1).value_or(e.world_size);
  e.rdzv_addr = str_or_empty(get, "MACTOR_RDZV_ADDR");
  read_master(get, e);
  check_consistent(e, "PMI_RANK", "PMI_SIZE");
  return e;
}

}  // namespace

const char* launcher_name(launcher_kind k) {
  switch (k) {
    case launcher_kind::mactor: return "mactor";
    case launcher_kind::open_mpi: return "mpirun";
    case launcher_kind::torchrun: return "torchrun";
    case launcher_kind::slurm: return "srun";
    case launcher_kind::pmi: return "pmi";
    case launcher_kind::none: break;
  }
  return "none";
}

env_getter process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

// mactor's data-plane settings (tensor/host_buffer.hpp, comm/ucx_transport.cpp), checked before
// anything reads them.
void check_data_plane_settings(const env_getter& get) {
  if (auto v = get("MACTOR_HUGE_PAGES"); v && *v != "on" && *v != "off" && *v != "1" && *v != "0" && *v != "yes" &&
                                         *v != "no")
    throw launch_env_error("environment variable MACTOR_HUGE_PAGES='" + *v + "' is not one of on, off (or 1, 0, yes, no)");
  if (auto v = get("MACTOR_UCX_SPIN_US")) {
    errno = 0;
    char* end = nullptr;
    const long x = std::strtol(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno == ERANGE || x < 0 || x > 1'000'000)
      throw launch_env_error("environment variable MACTOR_UCX_SPIN_US='" + *v +
                             "' is not a number of microseconds from 0 to 1000000 (e.g. MACTOR_UCX_SPIN_US=200)");
  }
}

launch_env detect_launch_env(const env_getter& get) {
  check_data_plane_settings(get);
  if (get("MACTOR_RANK") || get("MACTOR_WORLD_SIZE")) return from_mactor(get);
  if (get("OMPI_COMM_WORLD_RANK") || get("OMPI_COMM_WORLD_SIZE")) return from_open_mpi(get);
  // torchrun's variables win over Slurm's: torchrun is often started by srun, one per node.
  if (get("RANK") && (get("WORLD_SIZE") || get("LOCAL_RANK") || get("TORCHELASTIC_RUN_ID")))
    return from_torchrun(get);
  if (get("SLURM_PROCID")) return from_slurm(get);
  if (get("PMI_RANK")) return from_pmi(get);
  launch_env e;
  e.rdzv_addr = str_or_empty(get, "MACTOR_RDZV_ADDR");
  read_master(get, e);
  return e;
}

std::string describe(const launch_env& e) {
  return "rank " + std::to_string(e.rank) + "/" + std::to_string(e.world_size) + " (local " +
         std::to_string(e.local_rank) + "/" + std::to_string(e.local_world_size) + " on node " +
         std::to_string(e.node_rank) + ") via " + launcher_name(e.launcher);
}

}  // namespace mactor::comm
