// straggler_logging: the coordinator's StragglerDetector (see straggler_logging.hpp).
#include "actors/straggler_logging.hpp"

#include <stdexcept>

namespace mactor::actors {

std::unique_ptr<straggler_logging> straggler_logging::start(const config::megatron_args& args, int world,
                                                            std::vector<std::string>& lines) {
  const auto& s = args.straggler_detector;
  if (!s.log_straggler) return nullptr;
  std::unique_ptr<straggler_logging> d(new straggler_logging(args, world));
  d->on_ = !s.disable_straggler_on_startup;
  try {
    d->control_ = std::make_unique<inspector::straggler_control>(static_cast<int>(s.straggler_ctrlr_port), d->on_);
    lines.push_back("Controller ready to recv commands on port " + std::to_string(s.straggler_ctrlr_port) +
                    ". Current state " + (d->on_ ? "ON" : "OFF"));
  } catch (const std::runtime_error& e) {
    lines.push_back(std::string("StragglerDetector cannot be controlled.. ") + e.what());
  }
  return d;
}

std::vector<std::string> straggler_logging::iteration(std::int64_t iteration,
                                                      const std::vector<training::straggler_sample>& samples,
                                                      double flops) {
  std::vector<std::string> lines;
  if (control_) lines = control_->take_messages();
  if (on_) window_.add(samples, flops);  // off: Megatron's timers are null methods
  const std::int64_t interval = args_.training.log_interval;
  if (interval <= 0 || iteration % interval != 0) return lines;
  if (on_)
    for (auto& l : window_.report(interval, world_, args_.straggler_detector.straggler_minmax_count,
                                  training::straggler_timestamp()))
      lines.push_back(std::move(l));
  // _check_toggle: a request since the last report flips the state now.
  if (control_ && control_->apply_toggle()) {
    on_ = control_->on();
    window_.clear();
    lines.push_back(std::string("Toggling StragglerDetector State ") + (on_ ? "ON" : "OFF"));
  }
  return lines;
}

}  // namespace mactor::actors
