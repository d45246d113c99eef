// The fault-tolerance section clock and its state file (see the header).
#include "training/ft_sections.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "config/python_text.hpp"

namespace mactor::training {
namespace {

using json = nlohmann::json;

double seconds_between(ft_section_clock::clock::time_point from, ft_section_clock::clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> optional_of(const json& v, const std::string& where) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) throw std::invalid_argument(where + ": a timeout is not a number or null");
  return v.get<double>();
}

std::string seconds_text(const std::optional<double>& v) {
  if (!v) return "none";
  char text[32];
  std::snprintf(text, sizeof text, "%.1fs", *v);
  return text;
}

}  // namespace

std::optional<double> parse_optional_seconds(const std::string& text, const std::string& what) {
  if (text.empty() || text == "null" || text == "none" || text == "None") return std::nullopt;
  const auto v = config::parse_python_float(text);  // ft_launcher's float()
  if (!v || !(*v > 0))
    throw std::invalid_argument(what + " '" + text + "' is not a number of seconds above 0 (or null)");
  return v;
}

std::map<std::string, std::optional<double>> parse_section_timeouts(const std::string& spec) {
  std::map<std::string, std::optional<double>> out;
  std::size_t at = 0;
  while (at <= spec.size() && !spec.empty()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string entry = spec.substr(at, comma - at);
    const std::size_t colon = entry.find(':');
    if (colon == std::string::npos || colon == 0)
      throw std::invalid_argument("section timeout '" + entry + "' is not NAME:SECONDS; write e.g. setup:600,step:180,checkpointing:420");
    out[entry.substr(0, colon)] = parse_optional_seconds(entry.substr(colon + 1), "section " + entry.substr(0, colon) + "'s timeout");
    at = comma + 1;
  }
  return out;
}

std::string ft_state_json(const ft_section_timeouts& t) {
  json current = json::object();
  if (!t.calculated_sections.empty() || t.out_of_section_calculated) {
    json sections = json::object();
    for (const auto& [name, timeout] : t.section) sections[name] = optional_number(timeout);
    current["section"] = {{"section", sections},
                          {"out_of_section", optional_number(t.out_of_section)},
                          {"calculated_sections", json(std::vector<std::string>(t.calculated_sections.begin(),
                                                                                t.calculated_sections.end()))},
                          {"is_out_of_section_calculated", t.out_of_section_calculated}};
  }
  return json{{"current_timeouts", current}}.dump();
}

std::optional<ft_section_timeouts> parse_ft_state(const std::string& text, const std::string& where) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(where + " is not JSON (" + e.what() + "); delete it to start with the configured timeouts");
  }
  if (!root.is_object() || !root.contains("current_timeouts") || !root["current_timeouts"].is_object())
    throw std::invalid_argument(where + " has no \"current_timeouts\" object; delete it to start with the configured timeouts");
  const json& current = root["current_timeouts"];
  if (!current.contains("section")) return std::nullopt;
  const json& s = current["section"];
  if (!s.is_object() || !s.contains("section") || !s["section"].is_object())
    throw std::invalid_argument(where + ": \"section\" has no per-section timeouts; delete it to start with the configured timeouts");
  ft_section_timeouts t;
  for (const auto& [name, v] : s["section"].items()) t.section[name] = optional_of(v, where);
  t.out_of_section = optional_of(s.value("out_of_section", json(nullptr)), where);
  for (const auto& name : s.value("calculated_sections", json::array())) t.calculated_sections.insert(name.get<std::string>());
  t.out_of_section_calculated = s.value("is_out_of_section_calculated", false);
  return t;
}

std::string describe(const ft_section_timeouts& t) {
  std::string out;
  for (const auto& [name, timeout] : t.section) out += name + "=" + seconds_text(timeout) + " ";
  return out + "out-of-section=" + seconds_text(t.out_of_section);
}

ft_section_clock::ft_section_clock(ft_section_timeouts configured, clock::time_point start, double safety_factor)
    : timeouts_(std::move(configured)), safety_factor_(safety_factor), last_close_(start) {
  for (const auto& [name, timeout] : timeouts_.section) longest_[name] = -1;
}

void ft_section_clock::note_out_of_section(clock::time_point now) {
  if (open_.empty()) longest_out_of_section_ = std::max(longest_out_of_section_, seconds_between(last_close_, now));
}

void ft_section_clock::open(const std::string& name, clock::time_point at) {
  if (!longest_.count(name)) throw std::logic_error("fault tolerance: unknown section " + name);
  if (open_.count(name)) throw std::logic_error("fault tolerance: section " + name + " is already open");
  note_out_of_section(at);
  open_[name] = at;
}

void ft_section_clock::close(const std::string& name, clock::time_point at) {
  const auto it = open_.find(name);
  if (it == open_.end()) throw std::logic_error("fault tolerance: section " + name + " is not open");
  longest_[name] = std::max(longest_[name], seconds_between(it->second, at));
  open_.erase(it);
  if (open_.empty()) last_close_ = at;
}

void ft_section_clock::load(const ft_section_timeouts& saved) {
  timeouts_ = saved;
  for (const auto& [name, timeout] : saved.section) longest_.emplace(name, -1.0);
}

std::optional<ft_expiry> ft_section_clock::expired(clock::time_point now) const {
  if (open_.empty()) {
    const double quiet = seconds_between(last_close_, now);
    if (timeouts_.out_of_section && quiet > *timeouts_.out_of_section)
      return ft_expiry{"out-of-section", quiet, *timeouts_.out_of_section};
    return std::nullopt;
  }
  for (const auto& [name, since] : open_) {
    const auto it = timeouts_.section.find(name);
    const double open_s = seconds_between(since, now);
    if (it != timeouts_.section.end() && it->second && open_s > *it->second) return ft_expiry{name, open_s, *it->second};
  }
  return std::nullopt;
}

bool ft_section_clock::can_calculate(const std::vector<std::string>& sections, bool out_of_section) const {
  for (const auto& name : sections) {
    const auto it = longest_.find(name);
    if (it == longest_.end() || it->second <= 0) return false;
  }
  return !out_of_section || longest_out_of_section_ > 0;
}

void ft_section_clock::calculate(const std::vector<std::string>& sections, bool out_of_section, clock::time_point now) {
  note_out_of_section(now);  // the stretch since the last close counts when none is open
  const auto merged = [](bool both_calculated, double old_value, double new_value) {
    return both_calculated ? 0.5 * old_value + 0.5 * new_value : new_value;
  };
  for (const auto& name : sections) {
    const double fresh = safety_factor_ * longest_.at(name);
    const auto& old_value = timeouts_.section[name];
    const bool both = timeouts_.calculated_sections.count(name) && old_value.has_value();
    timeouts_.section[name] = merged(both, both ? *old_value : 0, fresh);
    timeouts_.calculated_sections.insert(name);
  }
  if (out_of_section) {
    const double fresh = safety_factor_ * longest_out_of_section_;
    const bool both = timeouts_.out_of_section_calculated && timeouts_.out_of_section.has_value();
    timeouts_.out_of_section = merged(both, both ? *timeouts_.out_of_section : 0, fresh);
    timeouts_.out_of_section_calculated = true;
  }
}

}  // namespace mactor::training
