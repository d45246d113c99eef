// Python's json.dumps(indent=4): floats as repr(), non-ASCII as \uXXXX, newline + indent per item.
#include "data/py_json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace mactor::data {
namespace {

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = c;
    std::size_t n = 1;
    if (c >= 0x80) {  // decode UTF-8
      n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      cp = c & (0xff >> (n + 1));
      for (std::size_t k = 1; k < n && i + k < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    }
    i += n;
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp >= 0x20 && cp < 0x7f) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
    } else {
      const std::uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      out += buf;
    }
  }
  out += '"';
}

void dump(const nlohmann::ordered_json& v, int depth, std::string& out) {
  const std::string pad(4 * (depth + 1), ' '), close_pad(4 * depth, ' ');
  switch (v.type()) {
    case nlohmann::json::value_t::null: out += "null"; return;
    case nlohmann::json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case nlohmann::json::value_t::number_integer: out += std::to_string(v.get<std::int64_t>()); return;
    case nlohmann::json::value_t::number_unsigned: out += std::to_string(v.get<std::uint64_t>()); return;
    case nlohmann::json::value_t::number_float: out += py_float_repr(v.get<double>()); return;
    case nlohmann::json::value_t::string: dump_string(v.get<std::string>(), out); return;
    case nlohmann::json::value_t::array: {
      if (v.empty()) { out += "[]"; return; }
      out += "[\n";
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ",\n";
        first = false;
        out += pad;
        dump(e, depth + 1, out);
      }
      out += "\n" + close_pad + "]";
      return;
    }
    case nlohmann::json::value_t::object: {
      if (v.empty()) { out += "{}"; return; }
      out += "{\n";
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ",\n";
        first = false;
        out += pad;
        dump_string(k, out);
        out += ": ";
        dump(e, depth + 1, out);
      }
      out += "\n" + close_pad + "}";
      return;
    }
    default: out += "null"; return;
  }
}

}  // namespace

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: fixed when -4 <= exponent < 16.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const auto e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<std::size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<std::size_t>(exp + 1)) + "." + digits.substr(static_cast<std::size_t>(exp + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string py_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  dump(value, 0, out);
  return out;
}

}  // namespace mactor::data
