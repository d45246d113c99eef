// Hand parser for mpirun-style options; see launch_options.hpp for why not cxxopts.
#include "tools/launcher/launch_options.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "config/memory_size.hpp"

namespace mactor::tools {
namespace {

int parse_count(const std::string& opt, const std::string& v, int min) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < min || x > 1 << 20)
    throw usage_error(opt + " " + v + " is not a whole number >= " + std::to_string(min) +
                      "; e.g. " + opt + " 4");
  return static_cast<int>(x);
}

double parse_seconds(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= 0))
    throw usage_error(opt + " " + v + " is not a number of seconds >= 0; e.g. " + opt + " 30");
  return x;
}

// --map-by ppr:N:node | node | slot (Open MPI's names; other mappers are refused by name).
void apply_map_by(launch_options& o, const std::string& v) {
  std::string spec = v.substr(0, v.find(','));  // modifiers such as ",oversubscribe"
  if (v.find(",oversubscribe") != std::string::npos || v.find(":oversubscribe") != std::string::npos)
    o.oversubscribe = true;
  if (spec.rfind("ppr:", 0) == 0) {
    auto colon = spec.find(':', 4);
    std::string unit = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (unit != "node")
      throw usage_error("--map-by " + v + ": only ppr:N:node is supported (N ranks per host); "
                        "e.g. --map-by ppr:4:node");
    o.npernode = parse_count("--map-by ppr:N:node", spec.substr(4, colon - 4), 1);
  } else if (spec == "node") {
    o.map_by_node = true;
  } else if (spec != "slot" && spec != "core") {
    throw usage_error("--map-by " + v + " is not supported; use slot (default), node or ppr:N:node");
  }
}

void apply_env_option(app_context& ctx, const std::string& v) {
  auto eq = v.find('=');
  std::string name = v.substr(0, eq);
  if (name.empty() || name.find_first_of(" \t") != std::string::npos)
    throw usage_error("-x '" + v + "' does not name a variable; use -x VAR or -x VAR=value");
  if (eq == std::string::npos)
    ctx.env.emplace_back(name, std::nullopt);
  else
    ctx.env.emplace_back(name, v.substr(eq + 1));
}

const char* const value_options[] = {
    "n", "np", "c", "H", "host", "hostfile", "machinefile", "default-hostfile", "N", "npernode",
    "map-by", "bind-to", "x", "output-filename", "timeout", "launch-agent", "rsh-agent",
    "rdzv-addr", "rdzv-port", "kill-grace", "remote-mactor", "max-restarts", "device-memory", "spares",
    "ft-param-rank_section_timeouts", "ft-param-rank_out_of_section_timeout"};
const char* const flag_options[] = {"oversubscribe", "tag-output", "timestamp-output",
                                    "display-map", "do-not-launch",
                                    "allow-run-as-root", "h", "help", "V", "version"};

bool is_in(const char* const* begin, const char* const* end, const std::string& name) {
  for (auto p = begin; p != end; ++p)
    if (name == *p) return true;
  return false;
}

// Applies one option; `ctx` is the app context being read.
void apply(launch_options& o, app_context& ctx, const std::string& opt, const std::string& name,
           const std::string& v) {
  if (name == "n" || name == "np" || name == "c") ctx.np = parse_count(opt, v, 1);
  else if (name == "H" || name == "host") o.host_lists.push_back(v);
  else if (name == "hostfile" || name == "machinefile" || name == "default-hostfile") o.hostfile = v;
  else if (name == "N" || name == "npernode") o.npernode = parse_count(opt, v, 1);
  else if (name == "map-by") apply_map_by(o, v);
  else if (name == "bind-to") {
    if (v == "core") o.bind = bind_policy::core;
    else if (v == "none") o.bind = bind_policy::none;
    else throw usage_error("--bind-to " + v + " is not supported; use core or none");
  } else if (name == "x") apply_env_option(ctx, v);
  else if (name == "output-filename") o.output_filename = v;
  else if (name == "timeout") o.timeout_s = parse_seconds(opt, v);
  else if (name == "kill-grace") o.kill_grace_s = parse_seconds(opt, v);
  else if (name == "max-restarts") o.max_restarts = parse_count(opt, v, 0);
  else if (name == "spares") o.spares = parse_count(opt, v, 0);
  else if (name == "ft-param-rank_section_timeouts") o.ft_section_timeouts = v;
  else if (name == "ft-param-rank_out_of_section_timeout") o.ft_out_of_section_timeout = v;
  else if (name == "device-memory") {
    if (!config::parse_memory_size(v))
      throw usage_error(opt + " " + v + " is not a memory size; give bytes or a number with K, M, G or T, e.g. 512M or 1.5G");
    o.device_memory = v;
  }
  else if (name == "launch-agent" || name == "rsh-agent") o.rsh_agent = split_words(v);
  else if (name == "rdzv-addr") o.rdzv_host = v;
  else if (name == "rdzv-port") o.rdzv_port = parse_count(opt, v, 1);
  else if (name == "remote-mactor") o.remote_mactor = v;
  else if (name == "oversubscribe") o.oversubscribe = true;
  else if (name == "tag-output") o.tag_output = true;
  else if (name == "timestamp-output") o.timestamp_output = true;
  else if (name == "display-map") o.display_map = true;
  else if (name == "do-not-launch") o.do_not_launch = true;
  else if (name == "h" || name == "help") o.help = true;
  else if (name == "V" || name == "version") o.version = true;
  // allow-run-as-root: mactor never refuses root; accepted so mpirun command lines work as they are.
}

void finish_context(launch_options& o, app_context& ctx, bool more_follow) {
  if (ctx.argv.empty())
    throw usage_error(more_follow ? "an app context before ':' has no program; write "
                                    "'mactor -n 2 prog_a : -n 2 prog_b'"
                                  : "no program given; usage: mactor [options] PROGRAM [ARGS...]");
  o.contexts.push_back(std::move(ctx));
  ctx = app_context{};
}

}  // namespace

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

launch_options parse_launch_options(int argc, char** argv) {
  launch_options o;
  app_context ctx;
  bool in_program = false;
  for (int i = 1; i < argc; ++i) {
    std::string tok = argv[i];
    if (tok == ":") {
      finish_context(o, ctx, true);
      in_program = false;
      continue;
    }
    if (in_program || tok.size() < 2 || tok[0] != '-') {
      in_program = true;
      ctx.argv.push_back(tok);
      continue;
    }
    std::string opt = tok, value;
    bool has_value = false;
    if (auto eq = tok.find('='); eq != std::string::npos) {
      opt = tok.substr(0, eq);
      value = tok.substr(eq + 1);
      has_value = true;
    }
    std::string name = opt.substr(opt[1] == '-' ? 2 : 1);
    if (name == "mca" || name == "gmca") {  // --mca KEY VALUE
      if (i + 2 >= argc) throw usage_error(opt + " needs a key and a value, e.g. --mca plm_rsh_agent ssh");
      std::string key = argv[++i], v = argv[++i];
      if (key == "plm_rsh_agent" || key == "orte_rsh_agent") o.rsh_agent = split_words(v);
      else throw usage_error(opt + " " + key + " has no meaning for mactor; only plm_rsh_agent is "
                             "understood, drop the others");
      continue;
    }
    bool takes_value = is_in(std::begin(value_options), std::end(value_options), name);
    if (!takes_value && !is_in(std::begin(flag_options), std::end(flag_options), name))
      throw usage_error("unknown option " + opt + "; see mactor --help");
    if (takes_value && !has_value) {
      if (i + 1 >= argc) throw usage_error(opt + " needs a value; see mactor --help");
      value = argv[++i];
    } else if (!takes_value && has_value) {
      throw usage_error(opt + " takes no value; write " + opt + " alone");
    }
    apply(o, ctx, opt, name, value);
  }
  if (o.help || o.version) return o;
  finish_context(o, ctx, false);
  if (o.rsh_agent.empty()) {
    if (const char* a = std::getenv("OMPI_MCA_plm_rsh_agent"); a && *a) o.rsh_agent = split_words(a);
    else o.rsh_agent = {"ssh"};
  }
  return o;
}

std::string launch_help() {
  return R"(usage: mactor [options] PROGRAM [ARGS...] [: [options] PROGRAM2 [ARGS...] ...]
Starts one process per rank, like Open MPI's mpirun, with the same option meanings.

Ranks and hosts:
  -n, -np, -c N           number of ranks for this program (default: all slots)
  -H, --host LIST         hosts with slot counts, e.g. a:2,b:2 (no :N means 1 slot)
  --hostfile FILE         one host per line, "name slots=N" (no slots= means 1)
  -N, --npernode N        N ranks on each host (same as --map-by ppr:N:node)
  --map-by SPEC           slot (fill each host, default), node (round-robin), ppr:N:node
  --bind-to core|none     pin each rank to one core (local rank mod cores), or not (default)
  --oversubscribe         allow more ranks than slots
  --display-map           print each rank's host, local rank and node to stderr
  --do-not-launch         map (and with --display-map print) the job, start nothing
  -x VAR[=value]          export VAR to the ranks (its value here when no =value)
  PROG_A : PROG_B         several programs, ranks numbered in order (each with its own -n, -x)

Output and time:
  --tag-output            prefix each line with [job,rank]<stdout>: or <stderr>:
  --timestamp-output      prefix each line with the time it arrived
  --output-filename DIR   also write DIR/1/rank.N/stdout and stderr
  --timeout SECONDS       stop the whole job after SECONDS (exit status 124)
  --kill-grace SECONDS    SIGTERM-to-SIGKILL delay when stopping the job (default 5)
  --device-memory SIZE    each rank's device memory, e.g. 512M or 80G: an allocation past it
                          fails with out-of-memory naming what the rank holds, as a GPU of
                          that size would (sets MACTOR_DEVICE_MEMORY; CPU ranks only)
  --max-restarts N        start the whole job again (fresh ranks and rendezvous) after a rank
                          fails, up to N times, as torchrun's --max-restarts; the program resumes
                          from its newest checkpoint (pretrain_gpt: give --save and --load the same
                          directory). Not after exit status 2 (a user error), 17 (Megatron's failed
                          result validation), --timeout or a forwarded Ctrl-C/SIGTERM
  --spares N              start N spare processes beyond -np (on the next slots) that wait; under
                          the program's --inprocess-restart a spare takes a failed rank's place
                          (the same as the program's --inprocess-active-world-size below -np)
  --ft-param-rank_section_timeouts SPEC    fault-tolerance section timeouts for the program's
                          --enable-ft-package, as ft_launcher's: setup:600,step:180,checkpointing:420
                          (none: not enforced); a section open past its timeout is a hang (exit 18)
  --ft-param-rank_out_of_section_timeout SECONDS   the same for the time no section is open
                          (both set MACTOR_FT_RANK_SECTION_TIMEOUTS / _OUT_OF_SECTION_TIMEOUT)

Remote hosts:
  --launch-agent CMD      command that runs a command on a host, as "CMD HOST COMMAND..."
                          (default: ssh, or $OMPI_MCA_plm_rsh_agent); e.g. "ip netns exec"
  --rsh-agent CMD, --mca plm_rsh_agent CMD   the same
  --rdzv-addr HOST        address the ranks use to reach mactor (default: 127.0.0.1 when all
                          ranks are local, else this host's first non-loopback IPv4 address)
  --rdzv-port PORT        port of mactor's key-value store (default: any free port)
  --remote-mactor PATH    path of mactor on remote hosts (default: this mactor's path)
  --allow-run-as-root     accepted for mpirun compatibility (mactor runs as root anyway)
  -h, --help, -V, --version

Each rank gets Open MPI's variables (OMPI_COMM_WORLD_SIZE, _RANK, _LOCAL_RANK, _LOCAL_SIZE,
_NODE_RANK), torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
MASTER_ADDR, MASTER_PORT) and mactor's (MACTOR_RANK, MACTOR_WORLD_SIZE, MACTOR_LOCAL_RANK,
MACTOR_LOCAL_SIZE, MACTOR_NODE_RANK, MACTOR_RDZV_ADDR, MACTOR_JOB_ID, MACTOR_RESTART_COUNT and
torchrun's TORCHELASTIC_RESTART_COUNT).
If a rank exits non-zero or dies, the others get SIGTERM (then SIGKILL after the grace period)
and mactor exits with that rank's status (128+signal for a signal), naming the rank.
Ctrl-C, SIGTERM, SIGUSR1 and SIGUSR2 are forwarded to every rank; stdin goes to rank 0. After a
forwarded Ctrl-C or SIGTERM mactor exits 128+signal, or 0 when every rank then exits 0 (as
pretrain_gpt --exit-signal-handler does after saving; give --kill-grace the time a save takes).
)";
}

}  // namespace mactor::tools
