// Megatron's fault-tolerance integration (megatron/training/ft_integration.py) over the section
// clock of ft_sections.hpp: "setup" from the start to the first training (or evaluation) step,
// "step" around each training step after the first, "checkpointing" around each save; with
// --calc-ft-timeouts, new timeouts after each save and at the end, by Megatron's rules (setup once
// a persistent checkpoint was loaded, step after 16 training steps, checkpointing once a
// synchronous save was seen, out-of-section at the end when all of these were), written to
// <save>/ft_state.json, which the next run loads. The coordinator drives it; the lines it returns
// are Megatron's "FT: ..." messages for the log.
//
// Unlike Megatron, an evaluation is not wrapped step by step: mactor runs each split as one
// request, so its time falls out of section.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "training/ft_sections.hpp"

namespace mactor::training {

struct ft_settings {
  std::string save_dir;         ///< --save: where ft_state.json lives
  bool async_save = false;      ///< --async-save: the checkpointing timeout is never recalculated
  bool calc_timeouts = false;   ///< --calc-ft-timeouts
  ft_section_timeouts configured;  ///< the launcher's (sections setup, step, checkpointing at least)
};

class ft_integration {
 public:
  using clock = ft_section_clock::clock;

  /// Megatron's setup(): makes the --save folder, loads its ft_state.json if there, opens
  /// "setup". Throws std::invalid_argument for an unreadable state file.
  ft_integration(ft_settings settings, clock::time_point now, std::vector<std::string>& log);

  void training_step_start(clock::time_point now);
  void training_step_end(clock::time_point now);
  /// Before an evaluation: closes "setup" when no training step came first.
  void evaluation_start(clock::time_point now);
  void checkpointing_start(clock::time_point now);
  void checkpointing_end(clock::time_point now, std::vector<std::string>& log);
  /// `local`: a --non-persistent-ckpt-type local checkpoint (too fast to time the setup by).
  void checkpoint_loaded(bool local) { persistent_loaded_ = !local; }
  /// The end of training: the last update, with the out-of-section timeout when all was seen.
  void shutdown(clock::time_point now, std::vector<std::string>& log);

  std::optional<ft_expiry> expired(clock::time_point now) const { return clock_.expired(now); }
  const ft_section_timeouts& timeouts() const { return clock_.timeouts(); }
  std::string state_path() const { return state_path_; }

 private:
  void close_setup(clock::time_point now);
  void maybe_update(clock::time_point now, bool closing, std::vector<std::string>& log);

  ft_settings settings_;
  ft_section_clock clock_;
  std::string state_path_;
  bool setup_open_ = true;
  bool persistent_loaded_ = false;
  int training_steps_ = 0, checkpoints_ = 0;
};

}  // namespace mactor::training
