// The wandb bridge: a Python process reading JSON lines on stdin (the init, then one log call per
// line) and answering "ready" or "error: ..." on stdout once wandb.init has run.
#include "training/wandb_writer.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "config/config_json.hpp"

extern char** environ;

namespace mactor::training {
namespace {

constexpr const char* bridge_script = R"PY(
import json, os, sys
answer = sys.stdout
def fail(text):
    answer.write("error: " + text.replace("\n", " ") + "\n"); answer.flush(); sys.exit(0)
try:
    import wandb
except Exception as e:
    fail("the wandb Python package cannot be imported by %s (%s: %s)" % (sys.executable, type(e).__name__, e))
start = json.loads(sys.stdin.readline())
try:
    os.makedirs(start["init"]["dir"], exist_ok=True)
    wandb.init(**start["init"])
    wandb.config.update(start["config_update"])
except Exception as e:
    fail("wandb.init failed (%s: %s)" % (type(e).__name__, e))
answer.write("ready\n"); answer.flush()
for line in sys.stdin:
    call = json.loads(line)
    wandb.log(call["data"], call["step"])
wandb.finish()
)PY";

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) throw std::runtime_error("wandb: the bridge process stopped reading (it may have crashed; see its output above)");
    done += static_cast<std::size_t>(n);
  }
}

std::string read_line(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

nlohmann::json init_call(const config::megatron_args& a) {
  const auto& l = a.logging;
  std::string dir;
  if (!l.wandb_save_dir.empty())
    dir = l.wandb_save_dir;
  else
    dir = (std::filesystem::path(a.checkpointing.save.value_or("")) / "wandb").string();
  nlohmann::json init = {{"dir", dir}, {"name", l.wandb_exp_name}, {"project", l.wandb_project},
                         {"config", nlohmann::json::parse(config::to_json(a))}};
  if (!l.wandb_entity.empty()) init["entity"] = l.wandb_entity;
  const char* job = std::getenv("SLURM_JOB_NAME");
  return {{"init", init}, {"config_update", {{"slurm_job_name", job ? job : "N/A"}}}};
}

}  // namespace

std::string wandb_python() {
  const char* p = std::getenv("MACTOR_PYTHON");
  return p && *p ? p : "python3";
}

wandb_writer::wandb_writer(const config::megatron_args& args) {
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("wandb: cannot make a pipe for the bridge process");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  const std::string python = wandb_python();
  std::string flag = "-c";
  std::string script = bridge_script;
  char* argv[] = {const_cast<char*>(python.c_str()), flag.data(), script.data(), nullptr};
  const int rc = ::posix_spawnp(&pid_, python.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  to_bridge_ = in_pipe[1];
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(to_bridge_);
    throw std::runtime_error("--wandb-project needs Python with the wandb package, but '" + python +
                             "' cannot be started; set MACTOR_PYTHON to such an interpreter");
  }
  ::signal(SIGPIPE, SIG_IGN);  // a bridge that died is reported by write_all, not by a signal
  try {
    write_all(to_bridge_, init_call(args).dump() + "\n");
  } catch (const std::runtime_error&) {
    // The bridge ended before reading its start: its answer below (or none) says why.
  }
  const std::string answer = read_line(out_pipe[0]);
  ::close(out_pipe[0]);
  if (answer != "ready") {
    finish();
    const std::string why = answer.rfind("error: ", 0) == 0 ? answer.substr(7) : "the bridge process ended without an answer";
    throw std::runtime_error("--wandb-project: " + why + "; install it (pip install wandb) for the Python that MACTOR_PYTHON "
                             "names (now '" + python + "'), or drop the --wandb-* flags and use --tensorboard-dir");
  }
}

wandb_writer::~wandb_writer() { finish(); }

void wandb_writer::log(const std::string& key, double value, std::int64_t step) {
  if (to_bridge_ < 0) return;
  write_all(to_bridge_, nlohmann::json{{"data", {{key, value}}}, {"step", step}}.dump() + "\n");
}

void wandb_writer::finish() {
  if (to_bridge_ >= 0) ::close(to_bridge_);
  to_bridge_ = -1;
  if (pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

}  // namespace mactor::training
