// Hot swap of the logger and the evaluator, coordinator side: which flags a swap may change,
// the new observer's config, and the handover (see inspection.hpp).
#include "actors/inspection.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/messages.hpp"
#include "actors/spawn.hpp"
#include "config/config_json.hpp"
#include "config/flag_table.hpp"
#include "config/parser.hpp"

namespace mactor::actors {
namespace {

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

}  // namespace

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
