// Python's int()/float() parsing and float/str repr, as argparse and Megatron's printouts use them.
#include "config/python_text.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace mactor::config {
namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Python allows one underscore between two digits ("1_000"); anywhere else it is invalid.
std::optional<std::string> drop_digit_underscores(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') { out += s[i]; continue; }
    bool digit_before = i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]));
    bool digit_after = i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]));
    if (!digit_before || !digit_after) return std::nullopt;
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_python_int(std::string_view text) {
  auto cleaned = drop_digit_underscores(strip(text));
  if (!cleaned || cleaned->empty()) return std::nullopt;
  std::string_view s = *cleaned;
  bool negative = false;
  if (s.front() == '+' || s.front() == '-') {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  std::uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (magnitude > limit + (negative ? 1 : 0)) return std::nullopt;  // beyond what we store
  return negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
}

std::optional<double> parse_python_float(std::string_view text) {
  auto cleaned = drop_digit_underscores(strip(text));
  if (!cleaned || cleaned->empty()) return std::nullopt;
  std::string_view s = *cleaned;
  double sign = 1.0;
  std::string_view body = s;
  if (body.front() == '+' || body.front() == '-') {
    sign = body.front() == '-' ? -1.0 : 1.0;
    body.remove_prefix(1);
  }
  if (iequals(body, "inf") || iequals(body, "infinity")) return sign * std::numeric_limits<double>::infinity();
  if (iequals(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (body.empty() || !(std::isdigit(static_cast<unsigned char>(body.front())) || body.front() == '.'))
    return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (end != body.data() + body.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {  // Python gives inf on overflow and 0 on underflow
    bool huge = false;
    for (char c : body) huge = huge || c == 'e' || c == 'E';
    value = huge && body.find('-') == std::string_view::npos ? std::numeric_limits<double>::infinity() : 0.0;
  } else if (ec != std::errc{}) {
    return std::nullopt;
  }
  return sign * value;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.5e-05": shortest round-trip digits
  const auto epos = sci.find('e');
  const int exponent = std::stoi(sci.substr(epos + 1));
  std::string mantissa = sci.substr(0, epos);
  const bool negative = mantissa.front() == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += e;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto int_len = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return negative ? "-" + out : out;
}

std::string python_str_repr(std::string_view text) {
  const char quote = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : text) {
    if (c == '\\' || c == quote) out += '\\';
    out += c;
  }
  out += quote;
  return out;
}

}  // namespace mactor::config
