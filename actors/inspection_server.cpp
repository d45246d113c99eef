// The live inspector's server: its settings from the environment (MACTOR_INSPECT, the token
// file, the stall threshold), starting and stopping it, and the token file it leaves behind
// (see inspection.hpp; what it serves is kept in inspection.cpp, hot swap in inspection_swap.cpp).
#include "actors/inspection.hpp"
#include "inspector/hang_rule.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <cerrno>
#include <mutex>
#include <stdexcept>

#include "actors/env_settings.hpp"
#include "actors/messages.hpp"
#include "comm/launch_env.hpp"
#include "comm/restart_in_place.hpp"
#include "config/config_json.hpp"
#include "inspector/access_token.hpp"
#include "inspector/server.hpp"
#include "inspector/snapshot_store.hpp"

namespace mactor::actors {
namespace {

using settings::env_or;
using settings::parse_seconds;

// MACTOR_INSPECT: "off", "HOST:PORT", "HOST", or "PORT".
std::optional<inspector::server_options> server_options_from_env() {
  inspector::server_options o;
  const std::string v = env_or("MACTOR_INSPECT");
  if (v == "off" || v == "0" || v == "no") return std::nullopt;
  if (v.empty()) return o;
  auto port_of = [&](const std::string& p) {
    try {
      std::size_t used = 0;
      const int n = std::stoi(p, &used);
      if (used == p.size() && n >= 0 && n <= 65535) return n;
    } catch (const std::exception&) {
    }
    throw std::invalid_argument("MACTOR_INSPECT='" + v + "': '" + p +
                                "' is not a port (use off, HOST:PORT, HOST or PORT, e.g. MACTOR_INSPECT=127.0.0.1:8765)");
  };
  const auto colon = v.rfind(':');
  if (colon != std::string::npos) {
    o.bind_host = v.substr(0, colon);
    o.port = port_of(v.substr(colon + 1));
  } else if (v.find_first_not_of("0123456789") == std::string::npos) {
    o.port = port_of(v);
  } else {
    o.bind_host = v;
  }
  if (o.bind_host.empty())
    throw std::invalid_argument("MACTOR_INSPECT='" + v + "' has no host (e.g. MACTOR_INSPECT=127.0.0.1:" +
                                std::to_string(o.port) + ")");
  return o;
}

// The default token file: $HOME/.mactor/inspector/<job id>.token, its folders made private.
std::string default_token_file() {
  const std::string home = env_or("HOME");
  if (home.empty()) return "";
  std::string id;
  try {
    id = comm::detect_launch_env(comm::process_env()).job_id;
  } catch (const std::exception&) {
  }
  if (id.empty() || id.find('/') != std::string::npos) id = "pid" + std::to_string(::getpid());
  const std::string dir = home + "/.mactor/inspector";
  for (const auto& d : {home + "/.mactor", dir})
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return "";
  return inspector::default_token_path(home, id);
}

// The token file this process made, for remove_inspector_token_file (any thread).
std::mutex token_file_mutex;
std::string token_file_made;

}  // namespace

void remove_inspector_token_file() {
  std::lock_guard lock(token_file_mutex);
  if (!token_file_made.empty()) ::unlink(token_file_made.c_str());
  token_file_made.clear();
}

bool inspection_enabled() {
  const std::string v = env_or("MACTOR_INSPECT");
  return !(v == "off" || v == "0" || v == "no");
}

job_inspection::job_inspection(caf::actor_system& sys, const config::megatron_args& args, double stall_threshold_s)
    : sys_(sys), train_iters_(args.training.train_iters.value_or(0)) {
  logger_args_ = eval_args_ = config::to_json(args, -1);
  store_ = std::make_unique<inspector::snapshot_store>(stall_threshold_s);
  hang_ = std::make_unique<inspector::hang_rule>(distributed_timeout_s(args, false), after_init_timeout_s(args),
                                                 std::chrono::duration<double>(status_interval).count());
  store_->set_iteration(0, train_iters_);
}

job_inspection::~job_inspection() {
  if (server_) server_->stop();
  job_ended();
}

void job_inspection::job_ended() { remove_inspector_token_file(); }

std::unique_ptr<job_inspection> job_inspection::start(caf::actor_system& sys, const caf::actor& coordinator,
                                                      const config::megatron_args& args, std::FILE* err) {
  auto options = server_options_from_env();
  if (!options) return nullptr;
  const double threshold = parse_seconds("MACTOR_STALL_THRESHOLD", env_or("MACTOR_STALL_THRESHOLD", "30"));
  const std::string explicit_file = env_or("MACTOR_INSPECT_TOKEN_FILE");
  options->token_file = explicit_file.empty() ? default_token_file() : explicit_file;
  std::unique_ptr<job_inspection> j(new job_inspection(sys, args, threshold));
  j->err_ = err;
  auto* store = j->store_.get();
  // The swap callback runs on a server thread: it asks the coordinator and waits for the answer.
  auto swap = [&sys, weak = caf::actor_cast<caf::weak_actor_ptr>(coordinator)](std::string target,
                                                                              std::vector<std::string> flags) {
    inspector::swap_result result{false, "the job has ended"};
    auto coordinator = caf::actor_cast<caf::actor>(weak);
    if (!coordinator) return result;
    caf::scoped_actor self{sys};
    self->request(coordinator, std::chrono::seconds(30), swap_request{std::move(target), std::move(flags)})
        .receive([&](swap_answer& a) { result = {a.ok, a.message}; },
                 [&](caf::error& e) { result = {false, "the coordinator did not answer: " + sys.render(e)}; });
    return result;
  };
  try {
    j->server_ = std::make_unique<inspector::server>([store] { return store->snapshot(); }, swap, *options);
  } catch (const std::runtime_error& e) {
    if (!explicit_file.empty() || options->token_file.empty()) throw;
    // The default token file could not be written: serve anyway, the token is printed.
    std::fprintf(err, "mactor inspector: warning: %s; the token is only printed\n", e.what());
    options->token_file.clear();
    j->server_ = std::make_unique<inspector::server>([store] { return store->snapshot(); }, swap, *options);
  }
  if (explicit_file.empty()) {
    {
      std::lock_guard lock(token_file_mutex);
      token_file_made = options->token_file;
    }
    // A restart in place (--inprocess-restart) execs over this image without its exit path.
    comm::before_restart_in_place(remove_inspector_token_file);
  }
  std::fprintf(err, "mactor inspector: listening on %s (token %s%s%s)\n  web page: %s\n  attach: mactor inspect %s --token-file %s\n",
               j->server_->address().c_str(), j->server_->token().c_str(),
               options->token_file.empty() ? "" : ", also in ", options->token_file.c_str(),
               j->server_->page_url().c_str(), j->server_->address().c_str(),
               options->token_file.empty() ? "FILE" : options->token_file.c_str());
  std::fflush(err);
  return j;
}

}  // namespace mactor::actors
