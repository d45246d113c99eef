// The variables ranks see under mactor, for one host and for several (through a fake rsh agent),
// checked against Open MPI's own rank map (mpirun --do-not-launch --display-map) and against
// ranks started by the real mpirun.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <set>

#include "probe_lines.hpp"

using namespace mactor::test;

namespace {

const std::string probe_vars =
    " OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK"
    " OMPI_COMM_WORLD_LOCAL_SIZE OMPI_COMM_WORLD_NODE_RANK RANK WORLD_SIZE LOCAL_RANK"
    " LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT MACTOR_RANK MACTOR_WORLD_SIZE MACTOR_LOCAL_RANK"
    " MACTOR_LOCAL_SIZE MACTOR_NODE_RANK MACTOR_RDZV_ADDR MACTOR_JOB_ID MACTOR_TEST_HOST";

// Open MPI's placement for `layout` (with fake hosts): rank -> host, read from --display-map.
std::map<int, std::string> open_mpi_map(const std::string& layout) {
  auto r = run_shell("mpirun --allow-run-as-root --do-not-launch --display-map " + layout + " 2>&1");
  std::map<int, std::string> host_of;
  std::string host;
  std::regex node_re("Data for node: (\\S+)"), rank_re("Process rank: (\\d+)");
  for (auto& line : lines_of(r.out)) {
    std::smatch m;
    if (std::regex_search(line, m, node_re)) host = m[1];
    else if (std::regex_search(line, m, rank_re)) host_of[std::stoi(m[1])] = host;
  }
  return host_of;
}

// What each rank must see for a rank->host map: local rank and size by order within its host,
// node index by the host's first appearance.
struct expected_place {
  std::string host;
  int local_rank, local_size, node;
};
std::map<int, expected_place> expected_from(const std::map<int, std::string>& host_of) {
  std::map<std::string, int> count, node_of;
  for (auto& [r, h] : host_of) {
    if (!node_of.count(h)) node_of[h] = static_cast<int>(node_of.size());
    ++count[h];
  }
  std::map<std::string, int> seen;
  std::map<int, expected_place> e;
  for (auto& [r, h] : host_of) e[r] = {h, seen[h]++, count[h], node_of[h]};
  return e;
}

}  // namespace

TEST_CASE("ranks on one host see Open MPI's, torchrun's and mactor's variables") {
  auto r = run_shell(mactor_bin() + " -np 4 --oversubscribe " + bin_dir() + "/rank_probe" + probe_vars);
  REQUIRE(r.status == 0);
  auto ranks = parse_probe(r.out);
  REQUIRE(ranks.size() == 4);
  std::set<std::string> rdzv, job, master;
  for (auto& [rank, v] : ranks) {
    std::string s = std::to_string(rank);
    CHECK(v["launcher"] == "mactor");
    for (auto* k : {"OMPI_COMM_WORLD_RANK", "RANK", "MACTOR_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                    "LOCAL_RANK", "MACTOR_LOCAL_RANK", "OMPI_COMM_WORLD_NODE_RANK"})
      CHECK(v[k] == s);
    for (auto* k : {"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "MACTOR_WORLD_SIZE",
                    "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MACTOR_LOCAL_SIZE"})
      CHECK(v[k] == "4");
    CHECK(v["MACTOR_NODE_RANK"] == "0");
    CHECK(std::regex_match(v["MACTOR_RDZV_ADDR"], std::regex("127\\.0\\.0\\.1:[0-9]+")));
    CHECK(v["MASTER_ADDR"] == "127.0.0.1");
    CHECK(std::stoi(v["MASTER_PORT"]) > 0);
    CHECK(v["MASTER_PORT"] != v["MACTOR_RDZV_ADDR"].substr(10));
    rdzv.insert(v["MACTOR_RDZV_ADDR"]);
    job.insert(v["MACTOR_JOB_ID"]);
    master.insert(v["MASTER_PORT"]);
  }
  CHECK(rdzv.size() == 1);
  CHECK(job.size() == 1);
  CHECK(master.size() == 1);
}

TEST_CASE("ranks on several hosts match Open MPI's own placement for the same options") {
  const char* layouts[] = {
      "-H a:2,b:2 -np 4",
      "-H a:1,b:3 -np 4",
      "-H a:2,b:2 --map-by node -np 3",
      "-H a:2,b:2 -N 1",
      "-H a:3,b:3 --map-by ppr:2:node",
      "-H a:1,b:1 -np 5 --oversubscribe",
      "-H a:1,b:2,c:1 -np 7 --oversubscribe",
  };
  for (const char* layout : layouts) {
    INFO("layout: " << layout);
    auto expected = expected_from(open_mpi_map(std::string(layout) + " true"));
    REQUIRE(!expected.empty());
    auto r = run_shell(mactor_bin() + " " + layout + " --launch-agent " + MACTOR_SOURCE_DIR +
                       "/tests/tools/fake_agent.sh " + bin_dir() + "/rank_probe" + probe_vars);
    INFO(r.err);
    REQUIRE(r.status == 0);
    auto ranks = parse_probe(r.out);
    REQUIRE(ranks.size() == expected.size());
    for (auto& [rank, e] : expected) {
      auto& v = ranks[rank];
      INFO("rank " << rank);
      CHECK(v["MACTOR_TEST_HOST"] == e.host);
      CHECK(v["local_rank"] == std::to_string(e.local_rank));
      CHECK(v["OMPI_COMM_WORLD_LOCAL_RANK"] == std::to_string(e.local_rank));
      CHECK(v["LOCAL_WORLD_SIZE"] == std::to_string(e.local_size));
      CHECK(v["local_size"] == std::to_string(e.local_size));
      CHECK(v["MACTOR_NODE_RANK"] == std::to_string(e.node));
      CHECK(v["world"] == std::to_string(expected.size()));
    }
  }
}

TEST_CASE("two programs separated by ':' get consecutive ranks and their own -x variables") {
  auto expected = expected_from(open_mpi_map("-H a:3,b:3 -np 2 true : -np 3 true"));
  auto r = run_shell(mactor_bin() + " -H a:3,b:3 --launch-agent " + MACTOR_SOURCE_DIR +
                     "/tests/tools/fake_agent.sh -np 2 -x APP=first " + bin_dir() +
                     "/rank_probe APP MACTOR_TEST_HOST : -np 3 -x APP=second " + bin_dir() +
                     "/rank_probe APP MACTOR_TEST_HOST");
  REQUIRE(r.status == 0);
  auto ranks = parse_probe(r.out);
  REQUIRE(ranks.size() == 5);
  for (int k = 0; k < 5; ++k) {
    CHECK(ranks[k]["APP"] == (k < 2 ? "first" : "second"));
    CHECK(ranks[k]["MACTOR_TEST_HOST"] == expected[k].host);
    CHECK(ranks[k]["world"] == "5");
  }
}

TEST_CASE("mpirun and mactor start the same program with the same ranks") {
  auto run = [](const std::string& launcher) {
    auto r = run_shell(launcher + " -np 4 " + bin_dir() + "/rank_probe");
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::set<std::string> seen;
    for (auto& [rank, v] : parse_probe(r.out))
      seen.insert(v["rank"] + "/" + v["world"] + " local " + v["local_rank"] + "/" +
                  v["local_size"] + " node " + v["node"]);
    return std::make_pair(seen, parse_probe(r.out)[0]["launcher"]);
  };
  auto [ompi, ompi_name] = run("mpirun --allow-run-as-root --oversubscribe");
  auto [ours, our_name] = run(mactor_bin() + " --oversubscribe");
  CHECK(ompi.size() == 4);
  CHECK(ompi == ours);
  CHECK(ompi_name == "mpirun");
  CHECK(our_name == "mactor");
}

TEST_CASE("option -x exports a value or mactor's own variable") {
  auto r = run_shell("MACTOR_T_FROM_HERE=here " + mactor_bin() + " -np 2 -x MACTOR_T_SET=given "
                     "-x MACTOR_T_FROM_HERE " + bin_dir() + "/rank_probe MACTOR_T_SET MACTOR_T_FROM_HERE");
  REQUIRE(r.status == 0);
  auto ranks = parse_probe(r.out);
  REQUIRE(ranks.size() == 2);
  for (auto& [rank, v] : ranks) {
    CHECK(v["MACTOR_T_SET"] == "given");
    CHECK(v["MACTOR_T_FROM_HERE"] == "here");
  }
}

TEST_CASE("binding to cores (--bind-to core) pins each rank to one core by local rank") {
  auto r = run_shell(mactor_bin() + " -np 2 --bind-to core sh -c "
                     "'echo rank=$MACTOR_RANK $(grep Cpus_allowed_list /proc/self/status | tr -d \"\\t\" | tr : =)'");
  REQUIRE(r.status == 0);
  auto ranks = parse_probe(r.out);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0]["Cpus_allowed_list"] != ranks[1]["Cpus_allowed_list"]);
  CHECK(ranks[0]["Cpus_allowed_list"].find_first_of(",-") == std::string::npos);
}

TEST_CASE("ranks started by mpirun on one node meet in a store hosted by rank 0") {
  auto r = run_shell("mpirun --allow-run-as-root --oversubscribe -np 3 " + bin_dir() + "/rank_kv");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("rank 0 got 'hello from rank 2") != std::string::npos);
  CHECK(r.out.find("rank 1 got 'echo hello from rank 1") != std::string::npos);
}

TEST_CASE("an ssh-like agent that re-parses the command in a shell starts remote ranks intact") {
  auto r = run_shell("OMPI_MCA_plm_rsh_agent=" + std::string(MACTOR_SOURCE_DIR) +
                     "/tests/tools/fake_ssh.sh " + mactor_bin() + " -H n1:1,n2:1 -x 'MACTOR_T_Q=a b;c' " +
                     bin_dir() + "/rank_probe MACTOR_TEST_HOST MACTOR_T_Q");
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto ranks = parse_probe(r.out);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0]["MACTOR_TEST_HOST"] == "n1");
  CHECK(ranks[1]["MACTOR_TEST_HOST"] == "n2");
  CHECK(r.out.find("MACTOR_T_Q=a b;c") != std::string::npos);
}

TEST_CASE("this host named by hostname, localhost or 127.0.0.1 runs its ranks without the agent") {
  for (std::string host : {std::string("$(hostname)"), std::string("localhost"), std::string("127.0.0.1")}) {
    INFO(host);
    // The agent is /bin/false: any rank sent through it would fail the job.
    auto r = run_shell(mactor_bin() + " -H " + host + ":2 --launch-agent /bin/false " + bin_dir() +
                       "/rank_probe MACTOR_NODE_RANK");
    CHECK(r.status == 0);
    CHECK(parse_probe(r.out).size() == 2);
  }
}
