// The live inspector, coordinator side: the store and server, the stall report and hot swap
// (see inspection.hpp; the stages' side is in stage_reporting.cpp).
#include "actors/inspection.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/env_settings.hpp"
#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "comm/launch_env.hpp"
#include "config/config_json.hpp"
#include "config/flag_table.hpp"
#include "config/parser.hpp"
#include "inspector/server.hpp"
#include "inspector/snapshot_store.hpp"
#include "training/stage_engine.hpp"

namespace mactor::actors {
namespace {

using clock_type = std::chrono::steady_clock;
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
  return dir + "/" + id + ".token";
}

// The flags a swap may change, and why others are refused.
bool logger_may_change(const std::string& dest) {
  if (dest == "log_interval" || dest == "tensorboard_dir") return true;
  if (dest == "log_params_norm" || dest == "log_num_zeros_in_grad") return false;  // the stages compute these
  const auto* spec = config::find_dest(dest);
  return spec && config::flag_groups()[spec->group].function == "_add_logging_args";
}
bool evaluator_may_change(const std::string& dest) { return dest == "eval_interval"; }

// The observers' config: the job's, with the given flags (parsed as pretrain_gpt would) on top.
std::string apply_flags(const std::string& base_json, const std::vector<std::string>& flags, bool logger) {
  if (flags.empty()) throw std::invalid_argument("no flags given (e.g. -- --log-interval 5)");
  config::parsed_command_line parsed;
  try {
    parsed = config::parse_command_line(flags, "mactor swap");
  } catch (const config::usage_error& e) {
    std::string text = e.what();
    const auto at = text.find("error: ");
    text = at == std::string::npos ? text : text.substr(at + 7);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    throw std::invalid_argument(text);
  }
  auto base = nlohmann::json::parse(base_json);
  const auto given = nlohmann::json::parse(config::to_json(parsed.args, -1));
  for (const auto& dest : parsed.given) {
    const auto* spec = config::find_dest(dest);
    const std::string flag = spec ? spec->options.front() : dest;
    if (!(logger ? logger_may_change(dest) : evaluator_may_change(dest)))
      throw std::invalid_argument(flag + " cannot be changed by swapping the " + (logger ? "logger" : "evaluator") +
                                  (logger ? " (it takes --log-interval, --tensorboard-dir and the logging flags "
                                            "other than --log-params-norm and --log-num-zeros-in-grad)"
                                          : " (it takes --eval-interval)"));
    base[dest] = given.at(dest);
  }
  auto args = config::from_json(base.dump());
  if (args.training.log_interval <= 0)
    throw std::invalid_argument("--log-interval must be a positive integer, got " + std::to_string(args.training.log_interval));
  if (args.validation.eval_interval < 0)
    throw std::invalid_argument("--eval-interval must be 0 or more, got " + std::to_string(args.validation.eval_interval));
  return base.dump();
}

std::string joined(const std::vector<std::string>& flags) {
  std::string s;
  for (const auto& f : flags) s += (s.empty() ? "" : " ") + f;
  return s;
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

observer_counters& counters_of(const std::string& kind) {
  static observer_counters logger, evaluator;
  if (kind == "logger") return logger;
  if (kind == "evaluator") return evaluator;
  throw std::invalid_argument("no observer counters for '" + kind + "'");
}

bool inspection_enabled() {
  const std::string v = env_or("MACTOR_INSPECT");
  return !(v == "off" || v == "0" || v == "no");
}

// ---------------------------------------------------------------- coordinator side

job_inspection::job_inspection(caf::actor_system& sys, const config::megatron_args& args, double stall_threshold_s)
    : sys_(sys), train_iters_(args.training.train_iters.value_or(0)) {
  logger_args_ = eval_args_ = config::to_json(args, -1);
  store_ = std::make_unique<inspector::snapshot_store>(stall_threshold_s);
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
    std::lock_guard lock(token_file_mutex);
    token_file_made = options->token_file;
  }
  std::fprintf(err, "mactor inspector: listening on %s (token %s%s%s)\n  web page: %s\n  attach: mactor inspect %s --token-file %s\n",
               j->server_->address().c_str(), j->server_->token().c_str(),
               options->token_file.empty() ? "" : ", also in ", options->token_file.c_str(),
               j->server_->page_url().c_str(), j->server_->address().c_str(),
               options->token_file.empty() ? "FILE" : options->token_file.c_str());
  std::fflush(err);
  return j;
}

double job_inspection::rate_of(const std::string& name, std::int64_t count) {
  auto& r = rates_[name];
  const auto now = clock::now();
  const double dt = std::chrono::duration<double>(now - r.at).count();
  if (dt >= 0.25) {
    r.per_second = count >= r.count ? static_cast<double>(count - r.count) / dt : 0.0;
    r.count = count;
    r.at = now;
  }
  return r.per_second;
}

void job_inspection::rank_joined(int rank, int replica) {
  ranks_.insert(rank);
  inspector::actor_status a;
  a.name = "agent/" + std::to_string(rank);
  a.kind = "agent";
  a.rank = rank;
  a.activity = "watching for stop or abort";
  store_->report(a);
  if (replica >= 0) {
    replicas_[replica] = rank;
    a.name = "replica/" + std::to_string(replica);
    a.kind = "replica";
    a.activity = "waiting for the coordinator";
    store_->report(a);
  }
}

std::int64_t job_inspection::stage_reported(const stage_status& s) {
  ++coordinator_handled_;
  inspector::actor_status a;
  a.name = "stage/" + std::to_string(s.rank);
  a.kind = "stage";
  a.rank = s.rank;
  a.activity = s.activity;
  a.mailbox_depth = s.mailbox_depth;
  a.messages_per_second = rate_of(a.name, s.messages_handled);
  a.bytes_sent = s.bytes_sent;
  a.bytes_received = s.bytes_received;
  const auto now = clock::now();
  // When an activity began, from its age when the report left.
  const auto began = [now](double age_s) {
    return now - std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(age_s));
  };
  store_->report(a, began(s.activity_age_s));
  for (const auto& side : s.sides) {
    inspector::actor_status b;
    b.name = side.kind + "/" + std::to_string(s.rank);
    b.kind = side.kind;
    b.rank = s.rank;
    b.activity = side.activity;
    b.mailbox_depth = side.mailbox_depth;
    b.messages_per_second = rate_of(b.name, side.messages_handled);
    store_->report(b, began(side.activity_age_s));
  }
  if (s.timeline_iteration > 0 && s.timeline_iteration == wanted_) {
    auto& events = timelines_[s.rank];
    events.clear();
    for (std::size_t i = 0; i < s.ops.size(); ++i)
      events.push_back({s.rank, s.ops[i], s.microbatches[i], s.chunks[i], s.starts[i], s.ends[i]});
    if (timelines_.size() == ranks_.size()) {  // every rank's share of one iteration: publish it
      std::vector<inspector::timeline_event> all;
      for (const auto& [rank, e] : timelines_) all.insert(all.end(), e.begin(), e.end());
      store_->set_last_iteration_timeline(std::move(all));
      timelines_.clear();
      wanted_ = 0;
    }
  }
  // A second after the last timeline, ask for one about a second ahead (at the iteration rate
  // seen since the last ask), so that every stage knows before it gets there; a stage that got
  // there first still has it among its recent ones. An ask that came to nothing is dropped.
  if (wanted_ > 0 && completed_ > wanted_ && now - wanted_at_ > std::chrono::seconds(5)) wanted_ = 0;
  if (wanted_ == 0 && completed_ > 0 && now - wanted_at_ > std::chrono::seconds(1)) {
    const double seconds = std::chrono::duration<double>(now - wanted_at_).count();
    const auto per_second = static_cast<std::int64_t>(static_cast<double>(completed_ - completed_at_ask_) / seconds);
    wanted_ = completed_ + 1 + (completed_at_ask_ > 0 ? per_second : 0);
    completed_at_ask_ = completed_;
    wanted_at_ = now;
    timelines_.clear();
  }
  return wanted_;
}

void job_inspection::coordinator_activity(std::string what, std::int64_t iteration) {
  ++coordinator_handled_;
  coordinator_activity_ = std::move(what);
  coordinator_since_ = clock::now();
  completed_ = iteration;
  report_coordinator();
  // A replica fans the coordinator's work out to its pipeline and merges what comes back.
  for (const auto& [replica, rank] : replicas_) {
    inspector::actor_status a;
    a.name = "replica/" + std::to_string(replica);
    a.kind = "replica";
    a.rank = rank;
    a.activity = coordinator_activity_ + " on its pipeline";
    store_->report(a, coordinator_since_);
  }
  store_->set_iteration(iteration, train_iters_);
}

void job_inspection::report_observer(const std::string& kind) {
  auto& c = counters_of(kind);
  inspector::actor_status a;
  a.name = kind;
  a.kind = kind;
  a.rank = 0;
  const auto generation = c.generation.load();
  a.activity = kind == "logger" ? "printing the records it is sent" : "planning evaluations";
  if (generation > 0) a.activity += " (swapped in, #" + std::to_string(generation + 1) + ")";
  a.mailbox_depth = c.mailbox.load();
  a.messages_per_second = rate_of(kind, c.handled.load());
  store_->report(a);
}

void job_inspection::report_coordinator() {
  inspector::actor_status c;
  c.name = c.kind = "coordinator";
  c.activity = coordinator_activity_;
  c.mailbox_depth = coordinator_mailbox_;
  c.messages_per_second = rate_of("coordinator", coordinator_handled_);
  store_->report(c, coordinator_since_);
}

void job_inspection::tick(std::int64_t coordinator_mailbox) {
  coordinator_mailbox_ = coordinator_mailbox;
  report_coordinator();
  report_observer("logger");
  report_observer("evaluator");
  // The stall report: a line when a wait passes the threshold, one more when it is over.
  std::set<std::string> now;
  for (const auto& line : store_->snapshot().stalls) {
    const std::string who = line.substr(0, line.find(" waits "));
    now.insert(who);
    if (!stalled_.count(who)) std::fprintf(err_, "mactor: stall: %s\n", line.c_str());
  }
  for (const auto& who : stalled_)
    if (!now.count(who)) std::fprintf(err_, "mactor: stall over: %s goes on\n", who.c_str());
  if (now != stalled_) std::fflush(err_);
  stalled_ = std::move(now);
}

void job_inspection::swap(caf::event_based_actor* self, const swap_request& r, caf::actor& logger, caf::actor& evaluator,
                          caf::response_promise promise) {
  const bool is_logger = r.target == "logger";
  if (!is_logger && r.target != "eval") {
    promise.deliver(swap_answer{false, "unknown swap target '" + r.target + "' (choose from 'logger', 'eval')"});
    return;
  }
  if (swapping_) {
    promise.deliver(swap_answer{false, "another swap is under way; try again when it has answered"});
    return;
  }
  std::string next;
  try {
    next = apply_flags(is_logger ? logger_args_ : eval_args_, r.flags, is_logger);
  } catch (const std::exception& e) {
    promise.deliver(swap_answer{false, std::string("bad flags for the new ") + (is_logger ? "logger" : "evaluator") +
                                           ": " + e.what() + "; the old one keeps running"});
    return;
  }
  const std::string flags = joined(r.flags);
  if (!is_logger) {
    // The evaluator keeps no state: the next plan comes from the new one. The old one has
    // answered every request sent to it before its stop (one sender, one order).
    auto old = evaluator;
    evaluator = spawn_evaluator(sys_, config::from_json(next));
    self->send(old, stop_message{});
    eval_args_ = next;
    counters_of("evaluator").generation.fetch_add(1);
    std::fprintf(err_, "mactor: the evaluator was swapped (%s)\n", flags.c_str());
    std::fflush(err_);
    promise.deliver(swap_answer{true, "the new evaluator plans the evaluations from the next iteration on (" + flags + ")"});
    return;
  }
  // The logger builds its successor (it knows the output and the job's shape); records keep going
  // to the old one until the successor exists, then to the successor, which starts when the old
  // one hands it the interval state after the last record sent to the old one.
  swapping_ = true;
  auto old = logger;
  self->request(old, std::chrono::seconds(20), logger_successor_request{next})
      .then(
          [=, this, &logger](bool ok, std::string& message, caf::actor& successor) mutable {
            swapping_ = false;
            if (!ok) {
              promise.deliver(swap_answer{false, "the new logger could not start: " + message + "; the old one keeps running"});
              return;
            }
            logger = successor;
            self->send(old, logger_handover{successor});
            logger_args_ = next;
            counters_of("logger").generation.fetch_add(1);
            std::fprintf(err_, "mactor: the logger was swapped (%s)\n", flags.c_str());
            std::fflush(err_);
            promise.deliver(swap_answer{true, "the new logger prints from the next record on (" + flags + ")"});
          },
          [=, this](caf::error& e) mutable {
            swapping_ = false;
            promise.deliver(swap_answer{false, "the old logger did not answer (" + sys_.render(e) + "); it keeps running"});
          });
}

}  // namespace mactor::actors
