// Text form of schedule actions: what `mactor schedule` prints and what tests write by hand.
#include "schedules/action.hpp"

#include <charconv>
#include <stdexcept>

namespace mactor::schedules {
namespace {

std::string_view prefix_of(op kind) {
  switch (kind) {
    case op::forward: return "F";
    case op::backward: return "B";
    case op::recv_forward: return "RF";
    case op::send_forward: return "SF";
    case op::recv_backward: return "RB";
    case op::send_backward: return "SB";
    case op::backward_weight: return "W";
  }
  return "?";
}

bool parse_int(std::string_view text, int& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size() && out >= 0;
}

action parse_token(std::string_view token) {
  static constexpr op kinds[] = {op::recv_forward, op::send_forward, op::recv_backward,
                                 op::send_backward, op::forward, op::backward, op::backward_weight};
  for (op kind : kinds) {
    std::string_view prefix = prefix_of(kind);
    if (!token.starts_with(prefix)) continue;
    std::string_view rest = token.substr(prefix.size());
    action a{kind, 0, 0};
    auto dot = rest.find('.');
    bool ok = dot == std::string_view::npos
                  ? parse_int(rest, a.microbatch)
                  : parse_int(rest.substr(0, dot), a.microbatch) &&
                        parse_int(rest.substr(dot + 1), a.chunk);
    if (ok) return a;
    break;
  }
  throw std::invalid_argument("bad schedule action '" + std::string(token) +
                              "': expected F, B, W, RF, SF, RB or SB, a microbatch and an optional "
                              ".chunk, e.g. F3.1");
}

}  // namespace

bool is_compute(op kind) { return kind == op::forward || kind == op::backward || kind == op::backward_weight; }

std::string to_string(const action& a) {
  std::string text(prefix_of(a.kind));
  text += std::to_string(a.microbatch);
  text += '.';
  text += std::to_string(a.chunk);
  return text;
}

std::string to_string(const std::vector<action>& actions) {
  std::string text;
  for (const action& a : actions) {
    if (!text.empty()) text += ' ';
    text += to_string(a);
  }
  return text;
}

std::vector<action> parse_actions(std::string_view text) {
  std::vector<action> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) out.push_back(parse_token(text.substr(pos, end - pos)));
    pos = end;
  }
  return out;
}

}  // namespace mactor::schedules
