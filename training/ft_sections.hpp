// Fault-tolerance sections, as NVIDIA Resiliency Extension's rank monitor keeps them for
// Megatron's --enable-ft-package: named parts of the training loop ("setup", "step",
// "checkpointing"), each with a timeout, and an out-of-section timeout for the time when none is
// open. A section open past its timeout, or no section open past the out-of-section timeout, is
// a hang. Timeouts come from the launcher (ft_launcher's --ft-param-rank_section_timeouts and
// --ft-param-rank_out_of_section_timeout, which `mactor` takes too) or are calculated from the
// times seen (--calc-ft-timeouts): the longest x a safety factor of 5, averaged with an earlier
// calculation, saved in the rank monitor client's state format (<save>/ft_state.json) so the
// next run starts with them. ft_integration.hpp decides when sections open and close.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mactor::training {

/// A timeout per section (nullopt: not enforced), the out-of-section one, and which of them were
/// calculated rather than configured (NVRx's SectionTimeouts).
struct ft_section_timeouts {
  std::map<std::string, std::optional<double>> section;
  std::optional<double> out_of_section;
  std::set<std::string> calculated_sections;
  bool out_of_section_calculated = false;
};

/// "setup:600,step:180,checkpointing:none" (ft_launcher's --ft-param-rank_section_timeouts; null,
/// none or nothing: not enforced). Throws std::invalid_argument naming the bad entry.
std::map<std::string, std::optional<double>> parse_section_timeouts(const std::string& spec);
/// A seconds value or null/none/"" (--ft-param-rank_out_of_section_timeout).
std::optional<double> parse_optional_seconds(const std::string& text, const std::string& what);

/// The state file's text, as RankMonitorClient.state_dict() gives it and Megatron writes it:
/// {"current_timeouts": {"section": {"section": {...}, "out_of_section": ..., "calculated_sections":
/// [...], "is_out_of_section_calculated": ...}}}; the "section" part only once something was calculated.
std::string ft_state_json(const ft_section_timeouts& t);
/// The section timeouts a state file holds (nullopt: none). Throws std::invalid_argument naming
/// `where` when the text is not such a file.
std::optional<ft_section_timeouts> parse_ft_state(const std::string& text, const std::string& where);
/// "setup=600.0s step=180.0s checkpointing=none out-of-section=300.0s" for the log.
std::string describe(const ft_section_timeouts& t);

/// A section open past its timeout ("out-of-section" when none was open).
struct ft_expiry {
  std::string section;
  double open_s = 0, timeout_s = 0;
};

/// The sections' clock (NVRx's TimeoutsCalc with the timeouts in force): which sections are open
/// since when, the longest each has been open, the longest stretch with none open.
class ft_section_clock {
 public:
  using clock = std::chrono::steady_clock;

  /// `configured` names the sections known (others are refused); the clock starts out of section.
  ft_section_clock(ft_section_timeouts configured, clock::time_point start, double safety_factor = 5.0);

  /// Throws std::logic_error for an unknown section, opening an open one or closing a closed one.
  void open(const std::string& name, clock::time_point at);
  void close(const std::string& name, clock::time_point at);
  bool is_open(const std::string& name) const { return open_.count(name) > 0; }

  /// Timeouts read from a state file replace those in force (the rank monitor does the same).
  void load(const ft_section_timeouts& saved);
  const ft_section_timeouts& timeouts() const { return timeouts_; }

  std::optional<ft_expiry> expired(clock::time_point now) const;

  /// Whether every section in `sections` closed at least once (and, with `out_of_section`, some
  /// time passed with none open).
  bool can_calculate(const std::vector<std::string>& sections, bool out_of_section) const;
  /// Those timeouts become the longest time seen x the safety factor, averaged with the value in
  /// force where that was calculated too; the others stay. Call only when can_calculate.
  void calculate(const std::vector<std::string>& sections, bool out_of_section, clock::time_point now);

 private:
  void note_out_of_section(clock::time_point now);

  ft_section_timeouts timeouts_;
  double safety_factor_;
  std::map<std::string, clock::time_point> open_;
  std::map<std::string, double> longest_;  // seconds; -1: never closed
  clock::time_point last_close_;
  double longest_out_of_section_ = -1;
};

}  // namespace mactor::training
