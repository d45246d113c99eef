// --log-straggler on rank 0: Megatron-Core's StragglerDetector as the coordinator runs it. Every
// iteration adds every rank's times (training/straggler_report.hpp) while the detector is on; at
// each log interval it gives Megatron's report lines, then applies a toggle asked for on the
// controller port (--straggler-ctrlr-port, inspector/straggler_control.hpp). Megatron's lines
// go to stdout through its logger, after the iteration's log line; so do these, through the
// coordinator's logger.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/megatron_args.hpp"
#include "inspector/straggler_control.hpp"
#include "training/straggler_report.hpp"

namespace mactor::actors {

class straggler_logging {
 public:
  /// Without --log-straggler: nullptr. Otherwise starts the controller; `lines` gets Megatron's
  /// "Controller ready ..." line, or its warning when the port cannot be bound (the detector then
  /// runs without a controller, as Megatron's).
  static std::unique_ptr<straggler_logging> start(const config::megatron_args& args, int world,
                                                  std::vector<std::string>& lines);

  /// One training iteration: every rank's sample and the iteration's FLOPs. Returns the lines to
  /// print after its log line (the controller's answers since the last call; at a log interval,
  /// the report and "Toggling StragglerDetector State ...").
  std::vector<std::string> iteration(std::int64_t iteration, const std::vector<training::straggler_sample>& samples,
                                     double flops);

 private:
  straggler_logging(const config::megatron_args& args, int world) : args_(args), world_(world) {}
  const config::megatron_args& args_;
  int world_;
  bool on_ = true;
  std::unique_ptr<inspector::straggler_control> control_;
  training::straggler_window window_;
};

}  // namespace mactor::actors
