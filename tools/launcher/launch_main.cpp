// `mactor [mpirun options] PROGRAM ARGS...`: parses, maps ranks to hosts, hosts the rendezvous
// store, and runs the job; `mactor --remote-exec SPEC` is the same program on a remote host.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "comm/rendezvous_server.hpp"
#include "comm/rendezvous_wire.hpp"
#include "inspector/access_token.hpp"
#include "tools/launcher/host_map.hpp"
#include "tools/launcher/job_runner.hpp"
#include "tools/launcher/launch_options.hpp"
#include "tools/launcher/remote_exec.hpp"
#include "tools/subcommands.hpp"

namespace mactor::tools {
namespace {

int allowed_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

// True when `name` is a numeric address assigned to one of this host's interfaces. Names are
// not resolved: a DNS lookup could stall the launch on a machine without a resolver.
bool is_own_address(const std::string& name) {
  in_addr want{};
  if (::inet_pton(AF_INET, name.c_str(), &want) != 1) return false;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* a = list; a && !found; a = a->ifa_next)
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET)
      found = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == want.s_addr;
  ::freeifaddrs(list);
  return found;
}

// The processes past the job's ranks are spares: `--spares N` of them, or all past the program's
// --inprocess-active-world-size. They need the program's in-job restart.
void set_aside_spares(job_plan& plan) {
  const int processes = plan.layout.processes();
  int active = processes - plan.opts.spares;
  if (const int a = plan.in_job.active_world_size; a > 0) {
    if (plan.opts.spares > 0 && a != active)
      throw usage_error("--spares " + std::to_string(plan.opts.spares) + " leaves " + std::to_string(active) +
                        " ranks but the program's --inprocess-active-world-size is " + std::to_string(a) +
                        "; give one of the two");
    if (a > processes)
      throw usage_error("--inprocess-active-world-size " + std::to_string(a) + " exceeds the " +
                        std::to_string(processes) + " processes mactor starts; raise -np");
    active = a;
  }
  if (active == processes) return;
  if (!plan.in_job.enabled)
    throw usage_error("spare processes (--spares, --inprocess-active-world-size) replace failed ranks under in-job "
                      "restart: add --inprocess-restart to the program's flags");
  plan.layout.active = active;
}

bool is_local_host(const std::string& name) {
  static const std::set<std::string> fixed = {"localhost", "127.0.0.1", "::1", "localhost.localdomain"};
  if (fixed.count(name) || is_own_address(name)) return true;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return false;
  std::string me = buf;
  return name == me || name == me.substr(0, me.find('.'));
}

// The first non-loopback IPv4 address of this host, or "" when there is none.
std::string first_external_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text)) found = text;
  }
  ::freeifaddrs(list);
  return found;
}

// A port nobody listens on now, for MASTER_PORT (PyTorch-style stores on rank 0 use it).
int free_port() {
  int port = 0;
  int fd = comm::listen_tcp(port);
  ::close(fd);
  return port;
}

std::string make_job_id() {
  auto t = std::chrono::system_clock::now().time_since_epoch().count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx-%x", static_cast<unsigned long long>(t) & 0xffffffffffULL,
                static_cast<unsigned>(::getpid()));
  return buf;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// One start of the job: a fresh store (no keys of an earlier start), job id and master port.
job_result run_attempt(job_plan& plan, const std::string& rdzv_host, int restart) {
  comm::rendezvous_server store(plan.opts.rdzv_port);
  plan.identity.job_id = make_job_id();
  plan.identity.restart_count = restart;
  // MASTER_ADDR/MASTER_PORT given to mactor are passed on, unless they are an enclosing
  // mactor job's own (a job started from inside a rank gets fresh ones).
  bool nested = std::getenv("MACTOR_RANK") != nullptr;
  auto master_env = [&](const char* name, const std::string& fallback) {
    return nested ? fallback : env_or(name, fallback);
  };
  plan.identity.rdzv_addr = rdzv_host + ":" + std::to_string(store.port());
  const auto& host0 = plan.layout.hosts[plan.layout.ranks[0].host];
  plan.identity.master_addr =
      master_env("MASTER_ADDR", plan.host_is_local[plan.layout.ranks[0].host] ? rdzv_host : host0.name);
  plan.identity.master_port = std::atoi(master_env("MASTER_PORT", "0").c_str());
  if (plan.identity.master_port <= 0 || restart > 0) plan.identity.master_port = free_port();
  const job_result r = run_job(plan, store);
  store.stop();
  // A job whose rank 0 was killed left its inspector token file (the default one, on this host;
  // a job that ended by itself removed its own).
  if (plan.host_is_local[plan.layout.ranks[0].host]) inspector::remove_job_token_files(env_or("HOME", ""), plan.identity.job_id);
  return r;
}

// --max-restarts starts the job again after a failure, not after what a restart cannot mend or
// what the user asked for: a bad command line or data (2), Megatron's failed result validation
// (17; its 16 asks for a resume), --timeout or a forwarded signal.
bool restartable(const job_result& r) {
  return r.exit_code != 0 && r.exit_code != 2 && r.exit_code != 17 && !r.stopped;
}

}  // namespace

int launch_main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--remote-exec") == 0) {
    try {
      return remote_exec_main(argv[2]);
    } catch (const usage_error& e) {
      std::fprintf(stderr, "mactor: error: %s\n", e.what());
      return 2;
    }
  }
  job_plan plan;
  try {
    plan.opts = parse_launch_options(argc, argv);
    if (plan.opts.help) {
      std::fputs(launch_help().c_str(), stdout);
      return 0;
    }
    if (plan.opts.version) {
      std::puts("mactor launcher 0.1 (mpirun-compatible options of Open MPI 4.1)");
      return 0;
    }
    if (plan.opts.spares > 0) {
      if (plan.opts.contexts.back().np <= 0) throw usage_error("--spares needs -np: the ranks, after which the spares come");
      plan.opts.contexts.back().np += plan.opts.spares;  // the spares take the next slots
    }
    plan.layout = map_ranks(plan.opts, allowed_cores());
    plan.in_job = in_job_restart_from(plan.opts.contexts[0].argv);
    set_aside_spares(plan);
    if (plan.opts.display_map) std::fputs(describe_map(plan.layout).c_str(), stderr);
    if (plan.opts.do_not_launch) return 0;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "mactor: error: %s\n", e.what());
    return 2;
  }
  bool all_local = true;
  for (auto& h : plan.layout.hosts) {
    plan.host_is_local.push_back(is_local_host(h.name));
    all_local = all_local && plan.host_is_local.back();
  }
  std::string rdzv_host = plan.opts.rdzv_host;
  if (rdzv_host.empty()) rdzv_host = all_local ? "127.0.0.1" : first_external_ipv4();
  if (rdzv_host.empty()) {
    std::fprintf(stderr, "mactor: error: this host has no non-loopback IPv4 address for remote "
                         "ranks to reach; give one with --rdzv-addr\n");
    return 2;
  }
  try {
    plan.remote_mactor = plan.opts.remote_mactor;
    if (plan.remote_mactor.empty()) plan.remote_mactor = std::filesystem::read_symlink("/proc/self/exe");
    for (int restart = 0;; ++restart) {
      const job_result r = run_attempt(plan, rdzv_host, restart);
      if (!restartable(r) || restart >= plan.opts.max_restarts) return r.exit_code;
      std::fprintf(stderr, "mactor: the job failed (exit status %d); starting it again (restart %d of %d)\n",
                   r.exit_code, restart + 1, plan.opts.max_restarts);
    }
  } catch (const comm::rendezvous_error& e) {
    std::fprintf(stderr, "mactor: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mactor: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace mactor::tools
