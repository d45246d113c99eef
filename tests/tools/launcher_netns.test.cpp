// A job across two hosts: network namespaces joined by a veth pair (10.213.7.0/24) stand in for
// machines, and "ip netns exec" is the rsh agent, so the ranks really talk over an interface.
// Needs CAP_SYS_ADMIN; where namespaces cannot be made the test warns with the exact reason and
// checks nothing else (set MACTOR_REQUIRE_NETNS=1 to make that a failure instead).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>

#include "run_command.hpp"

using namespace mactor::test;

namespace {

// Two namespaces "<prefix>a" (10.213.7.1) and "<prefix>b" (10.213.7.2); removed on destruction.
struct two_hosts {
  std::string a, b, why_not;
  two_hosts() {
    std::string p = "mactor_t" + std::to_string(::getpid()) + "_";
    a = p + "a";
    b = p + "b";
    std::string va = "mtv" + std::to_string(::getpid()) + "a", vb = "mtv" + std::to_string(::getpid()) + "b";
    auto r = run_shell("set -e; ip netns add " + a + "; ip netns add " + b +
                       "; ip link add " + va + " type veth peer name " + vb +
                       "; ip link set " + va + " netns " + a + "; ip link set " + vb + " netns " + b +
                       "; ip -n " + a + " addr add 10.213.7.1/24 dev " + va +
                       "; ip -n " + b + " addr add 10.213.7.2/24 dev " + vb +
                       "; for n in " + a + " " + b + "; do ip -n $n link set lo up; done"
                       "; ip -n " + a + " link set " + va + " up; ip -n " + b + " link set " + vb + " up");
    if (r.status != 0) why_not = r.err;
  }
  ~two_hosts() { run_shell("ip netns del " + a + "; ip netns del " + b); }
  std::string in_a(const std::string& cmd) const { return "ip netns exec " + a + " " + cmd; }
};

bool netns_required() {
  const char* v = std::getenv("MACTOR_REQUIRE_NETNS");
  return v && std::string(v) == "1";
}

}  // namespace

TEST_CASE("a job across two network namespaces exchanges data between the hosts") {
  two_hosts h;
  if (!h.why_not.empty()) {
    WARN("network namespaces unavailable here, so the two-host job was not run: " << h.why_not);
    CHECK_FALSE(netns_required());
    return;
  }
  auto r = run_shell(h.in_a(mactor_bin() + " -H " + h.a + ":1," + h.b + ":1 --launch-agent 'ip netns exec' " +
                            bin_dir() + "/rank_kv"));
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("ips: 10.213.7.1 10.213.7.2") != std::string::npos);
  CHECK(r.out.find("rank 0 got 'hello from rank 1 at 10.213.7.2' from 10.213.7.2") != std::string::npos);
  CHECK(r.out.find("rank 1 got 'echo hello from rank 1 at 10.213.7.2' from 10.213.7.1") != std::string::npos);
}

TEST_CASE("a rank killed on one namespace host stops the ranks on the other") {
  two_hosts h;
  if (!h.why_not.empty()) {
    WARN("network namespaces unavailable here: " << h.why_not);
    CHECK_FALSE(netns_required());
    return;
  }
  auto r = run_shell(h.in_a(mactor_bin() + " -H " + h.a + ":2," + h.b + ":2 --launch-agent 'ip netns exec' " +
                            bin_dir() + "/rank_exit --rank 3 --signal 9 --after-ms 300 --sleep-s 30"));
  CHECK(r.status == 137);
  CHECK(r.err.find("rank 3 ") != std::string::npos);
  CHECK(r.err.find(h.b) != std::string::npos);
  CHECK(r.seconds < 10);
  CHECK(run_shell("ip netns pids " + h.a + "; ip netns pids " + h.b).out.empty());
}
