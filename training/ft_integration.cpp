// Megatron's fault-tolerance hooks and its rules for recalculating timeouts (see the header).
#include "training/ft_integration.hpp"

#include <filesystem>

#include "checkpoint/durable_file.hpp"

namespace mactor::training {
namespace {

// Megatron's _NUM_WARMUP_ITERS and _MIN_ITERS_FOR_STEP_TIMEOUT_UPDATE.
constexpr int warmup_steps = 1;
constexpr int steps_before_step_update = 16;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return "[" + out + "]";
}

}  // namespace

ft_integration::ft_integration(ft_settings settings, clock::time_point now, std::vector<std::string>& log)
    : settings_(std::move(settings)), clock_(settings_.configured, now) {
  log.push_back("FT: initializing...");
  std::filesystem::create_directories(settings_.save_dir);
  state_path_ = (std::filesystem::path(settings_.save_dir) / "ft_state.json").string();
  if (std::filesystem::exists(state_path_)) {
    if (auto saved = parse_ft_state(checkpoint::read_whole_file(state_path_), state_path_)) {
      clock_.load(*saved);
      log.push_back("FT: loaded timeouts from " + state_path_ + ". " + describe(clock_.timeouts()));
    }
  }
  log.push_back("FT: initialized. Timeouts: " + describe(clock_.timeouts()));
  clock_.open("setup", now);
}

void ft_integration::close_setup(clock::time_point now) {
  if (!setup_open_) return;
  clock_.close("setup", now);
  setup_open_ = false;
}

void ft_integration::training_step_start(clock::time_point now) {
  close_setup(now);
  if (training_steps_ >= warmup_steps) clock_.open("step", now);
}

void ft_integration::training_step_end(clock::time_point now) {
  if (training_steps_ >= warmup_steps) clock_.close("step", now);
  ++training_steps_;
}

void ft_integration::evaluation_start(clock::time_point now) { close_setup(now); }

void ft_integration::checkpointing_start(clock::time_point now) { clock_.open("checkpointing", now); }

void ft_integration::checkpointing_end(clock::time_point now, std::vector<std::string>& log) {
  clock_.close("checkpointing", now);
  ++checkpoints_;
  maybe_update(now, false, log);
}

void ft_integration::shutdown(clock::time_point now, std::vector<std::string>& log) {
  log.push_back("FT: closing...");
  maybe_update(now, true, log);
  log.push_back("FT: closed.");
}

void ft_integration::maybe_update(clock::time_point now, bool closing, std::vector<std::string>& log) {
  if (!settings_.calc_timeouts) return;
  std::vector<std::string> sections;
  if (persistent_loaded_)
    sections.push_back("setup");
  else
    log.push_back("FT: can't update the setup section timeout until persistent checkpoint is loaded");
  if (training_steps_ >= steps_before_step_update)
    sections.push_back("step");
  else
    log.push_back("FT: need to see more training iterations to update the step section timeout");
  if (checkpoints_ > 0) {
    if (!settings_.async_save)
      sections.push_back("checkpointing");
    else
      log.push_back("FT: can't update the checkpointing section timeout with async checkpointing");
  } else {
    log.push_back("FT: checkpointing section is not updated until a checkpoint was saved");
  }
  bool out_of_section = false;
  if (closing) {
    const bool setup_and_step = persistent_loaded_ && training_steps_ >= steps_before_step_update;
    out_of_section = setup_and_step && checkpoints_ > 0;
    if (!out_of_section) log.push_back("FT: the out-of-section timeout won't be updated until all FT sections were seen");
  }
  if (sections.empty() && !out_of_section) return;
  log.push_back("FT: updating timeouts for: " + joined(sections) +
                " update out-of-section: " + (out_of_section ? "True" : "False") + " ...");
  if (!clock_.can_calculate(sections, out_of_section)) {
    log.push_back("FT: not enough data to calculate the timeouts yet");
    return;
  }
  clock_.calculate(sections, out_of_section, now);
  // Next to the checkpoints, as they are written: a crash leaves the old file or the whole new one.
  checkpoint::write_file_atomically(state_path_, ft_state_json(clock_.timeouts()));
  log.push_back("FT: updated timeouts saved to " + state_path_ + ". " + describe(clock_.timeouts()));
}

}  // namespace mactor::training
