// The coordinator's side of --enable-ft-package (training/ft_integration.hpp): the sections open
// and close where Megatron's training loop calls its fault-tolerance hooks, their "FT: ..." lines go
// to the log, and a section open past its timeout ends the job as a hang.
#include <caf/all.hpp>
#include <cstdio>

#include "actors/coordinator_state.hpp"
#include "actors/env_settings.hpp"

namespace mactor::actors::coordination {
namespace {

void log_lines(coordinator_actor* self, std::vector<std::string> lines) {
  for (auto& line : lines) log(self, std::move(line));
}

// Runs `update` (which may write ft_state.json) and logs its lines; a failed write is a warning.
template <class Update>
void update_and_log(coordinator_actor* self, Update&& update) {
  std::vector<std::string> lines;
  try {
    update(lines);
  } catch (const std::exception& e) {
    lines.push_back(std::string("FT: WARNING: the timeouts were not saved: ") + e.what());
  }
  log_lines(self, std::move(lines));
}

// The launcher's timeouts, from MACTOR_FT_RANK_SECTION_TIMEOUTS and
// MACTOR_FT_RANK_OUT_OF_SECTION_TIMEOUT (what `mactor --ft-param-rank_section_timeouts=...` sets):
// setup, step and checkpointing, not enforced unless given. Throws std::invalid_argument.
training::ft_section_timeouts ft_timeouts_from_env() {
  training::ft_section_timeouts t;
  for (const char* name : {"setup", "step", "checkpointing"}) t.section[name] = std::nullopt;
  for (auto& [name, timeout] : training::parse_section_timeouts(settings::env_or("MACTOR_FT_RANK_SECTION_TIMEOUTS")))
    t.section[name] = timeout;
  t.out_of_section = training::parse_optional_seconds(settings::env_or("MACTOR_FT_RANK_OUT_OF_SECTION_TIMEOUT"),
                                                      "the out-of-section timeout");
  return t;
}

}  // namespace

void start_fault_tolerance(coordinator_actor* self) {
  auto& s = self->state;
  if (!s.args.ft_package.enable_ft_package) return;
  training::ft_settings ft;
  ft.save_dir = *s.args.checkpointing.save;  // validation requires --save
  ft.async_save = s.args.checkpointing.async_save.value_or(false);
  ft.calc_timeouts = s.args.ft_package.calc_ft_timeouts;
  ft.configured = ft_timeouts_from_env();
  std::vector<std::string> lines;
  s.ft = std::make_unique<training::ft_integration>(std::move(ft), clock_type::now(), lines);
  log_lines(self, std::move(lines));
}

void ft_checkpointing_end(coordinator_actor* self) {
  auto& ft = self->state.ft;
  if (ft) update_and_log(self, [&](std::vector<std::string>& lines) { ft->checkpointing_end(clock_type::now(), lines); });
}

void stop_fault_tolerance(coordinator_actor* self) {
  auto& ft = self->state.ft;
  if (!ft) return;
  update_and_log(self, [&](std::vector<std::string>& lines) { ft->shutdown(clock_type::now(), lines); });
  ft.reset();
}

std::optional<std::string> fault_tolerance_hang(coordinator_actor* self) {
  auto& s = self->state;
  if (!s.ft) return std::nullopt;
  const auto expired = s.ft->expired(clock_type::now());
  if (!expired) return std::nullopt;
  const auto& t = s.ft->timeouts();
  const bool calculated = expired->section == "out-of-section"
                              ? t.out_of_section_calculated
                              : t.calculated_sections.count(expired->section) > 0;
  char text[512];
  std::snprintf(text, sizeof text,
                "rank 0: fault tolerance: the %s section has been open %.1f s, past its timeout of %.1f s (%s) at "
                "iteration %lld; the job is hung. Raise the timeout (mactor --ft-param-rank_section_timeouts, "
                "--ft-param-rank_out_of_section_timeout) or delete %s if the job is only slower than before",
                expired->section.c_str(), expired->open_s, expired->timeout_s,
                calculated ? ("calculated, from " + s.ft->state_path()).c_str() : "configured",
                static_cast<long long>(s.iteration), s.ft->state_path().c_str());
  return std::string(text);
}

}  // namespace mactor::actors::coordination
