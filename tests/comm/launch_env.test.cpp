// Rank discovery from each launcher's variables, using the values those launchers really set
// (Open MPI 4.1's as printed by mpirun here, Slurm's and torchrun's as documented).
#include <catch2/catch.hpp>

#include <map>

#include "comm/launch_env.hpp"

using namespace mactor::comm;

namespace {
env_getter fake(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("no launcher variables mean a single process") {
  auto e = detect_launch_env(fake({}));
  CHECK(e.launcher == launcher_kind::none);
  CHECK(e.rank == 0);
  CHECK(e.world_size == 1);
}

TEST_CASE("mactor's variables win over the Open MPI and torchrun ones it also sets") {
  auto e = detect_launch_env(fake({{"MACTOR_RANK", "5"}, {"MACTOR_WORLD_SIZE", "8"},
                                   {"MACTOR_LOCAL_RANK", "1"}, {"MACTOR_LOCAL_SIZE", "4"},
                                   {"MACTOR_NODE_RANK", "1"}, {"MACTOR_RDZV_ADDR", "10.0.0.1:4000"},
                                   {"MACTOR_JOB_ID", "j1"}, {"OMPI_COMM_WORLD_RANK", "0"},
                                   {"RANK", "0"}, {"WORLD_SIZE", "8"}}));
  CHECK(e.launcher == launcher_kind::mactor);
  CHECK(e.rank == 5);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 4);
  CHECK(e.node_rank == 1);
  CHECK(e.rdzv_addr == "10.0.0.1:4000");
  CHECK(e.job_id == "j1");
}

TEST_CASE("Open MPI's variables give rank, local rank and the node block") {
  auto e = detect_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "6"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                   {"OMPI_COMM_WORLD_NODE_RANK", "2"},
                                   {"OMPI_MCA_orte_num_nodes", "2"},
                                   {"OMPI_MCA_ess_base_jobid", "1244987393"}}));
  CHECK(e.launcher == launcher_kind::open_mpi);
  CHECK(e.rank == 6);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 2);
  CHECK(e.local_world_size == 4);
  CHECK(e.node_rank == 1);
  CHECK(e.job_id == "1244987393");
}

TEST_CASE("Slurm's variables give local size from the tasks-per-node list") {
  auto e = detect_launch_env(fake({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"},
                                   {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "3"},
                                   {"SLURM_STEP_TASKS_PER_NODE", "2(x3),2"},
                                   {"SLURM_JOB_ID", "42"}}));
  CHECK(e.launcher == launcher_kind::slurm);
  CHECK(e.rank == 7);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 2);
  CHECK(e.node_rank == 3);
  auto uneven = detect_launch_env(fake({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "5"},
                                        {"SLURM_NODEID", "1"}, {"SLURM_TASKS_PER_NODE", "4,1"}}));
  CHECK(uneven.local_world_size == 1);
}

TEST_CASE("torchrun's variables win over Slurm's when torchrun runs under srun") {
  auto e = detect_launch_env(fake({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                   {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "1"},
                                   {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"},
                                   {"TORCHELASTIC_RUN_ID", "r"}, {"SLURM_PROCID", "1"},
                                   {"SLURM_NTASKS", "2"}}));
  CHECK(e.launcher == launcher_kind::torchrun);
  CHECK(e.rank == 3);
  CHECK(e.local_world_size == 2);
  CHECK(e.node_rank == 1);
  CHECK(e.master_addr == "node0");
  CHECK(e.master_port == 29500);
}

TEST_CASE("malformed or inconsistent launcher variables are refused by name") {
  CHECK_THROWS_WITH(detect_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
                    Catch::Contains("OMPI_COMM_WORLD_RANK='x'"));
  CHECK_THROWS_WITH(detect_launch_env(fake({{"RANK", "4"}, {"WORLD_SIZE", "4"}})),
                    Catch::Contains("RANK=4 is not below WORLD_SIZE=4"));
  CHECK_THROWS_WITH(detect_launch_env(fake({{"MACTOR_RANK", "0"}})),
                    Catch::Contains("MACTOR_WORLD_SIZE is not set"));
  CHECK_THROWS_WITH(detect_launch_env(fake({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                            {"SLURM_NODEID", "5"}, {"SLURM_TASKS_PER_NODE", "2"}})),
                    Catch::Contains("no entry for node 5"));
}

TEST_CASE("malformed data-plane settings are errors naming the variable") {
  CHECK_NOTHROW(detect_launch_env(fake({{"MACTOR_HUGE_PAGES", "off"}, {"MACTOR_UCX_SPIN_US", "200"}})));
  CHECK_THROWS_WITH(detect_launch_env(fake({{"MACTOR_HUGE_PAGES", "maybe"}})),
                    "environment variable MACTOR_HUGE_PAGES='maybe' is not one of on, off (or 1, 0, yes, no)");
  for (const char* bad : {"fast", "-5", "2000000", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(detect_launch_env(fake({{"MACTOR_UCX_SPIN_US", bad}})),
                      "environment variable MACTOR_UCX_SPIN_US='" + std::string(bad) +
                          "' is not a number of microseconds from 0 to 1000000 (e.g. MACTOR_UCX_SPIN_US=200)");
  }
}
