// argparse-compatible parsing of Megatron's flags: the same option matching, nargs, type and error text.
#include "config/parser.hpp"

#include <map>
#include <regex>
#include <sstream>
#include <type_traits>
#include <variant>

#include "config/flag_table.hpp"
#include "config/list_expression.hpp"
#include "config/python_text.hpp"

namespace mactor::config {
namespace {

using flag_value = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                                std::vector<double>, std::vector<std::string>, int_or_list_value>;

// argparse's classification of one command-line word.
enum class word_kind { option, argument, separator };

struct classified {
  word_kind kind = word_kind::argument;
  const flag_spec* spec = nullptr;  // known option
  std::string option;               // the option string as written (before '=')
  std::optional<std::string> explicit_value;  // "--x=v"
};

bool is_program_flag(std::string_view s) {
  return s == "-h" || s == "--help" || s == "--dump-config" || s == "--flag-status";
}

classified classify(const std::string& word, bool after_separator) {
  static const std::regex negative_number(R"(^-\d+$|^-\d*\.\d+$)");
  classified c;
  if (after_separator) return c;
  if (word == "--") { c.kind = word_kind::separator; return c; }
  if (word.empty() || word[0] != '-' || word.size() == 1) return c;
  c.kind = word_kind::option;
  c.option = word;
  if (const auto* s = find_flag(word)) { c.spec = s; return c; }
  if (is_program_flag(word)) return c;
  if (word.starts_with("--pipeline-schedule=")) {
    c.option = "--pipeline-schedule";
    c.explicit_value = word.substr(c.option.size() + 1);
    return c;
  }
  if (auto eq = word.find('='); eq != std::string::npos) {
    if (const auto* s = find_flag(std::string_view(word).substr(0, eq))) {
      c.spec = s;
      c.option = word.substr(0, eq);
      c.explicit_value = word.substr(eq + 1);
      return c;
    }
  }
  // Megatron has no option that looks like a negative number, so "-1" and "-.5" are values.
  if (std::regex_match(word, negative_number) || word.find(' ') != std::string::npos) c.kind = word_kind::argument;
  return c;
}

std::string type_name(value_kind k) {
  switch (k) {
    case value_kind::int_value: return "int";
    case value_kind::float_value: return "float";
    case value_kind::tuple_value: return "tuple_type";
    case value_kind::freq_value: return "moe_freq_type";
    default: return "str";
  }
}

class parser {
 public:
  explicit parser(std::string_view prog) : prog_(prog) {}

  parsed_command_line run(std::span<const std::string> words) {
    std::vector<classified> kinds;
    bool after_separator = false;
    for (const auto& w : words) {
      kinds.push_back(classify(w, after_separator));
      after_separator = after_separator || kinds.back().kind == word_kind::separator;
    }
    for (std::size_t i = 0; i < words.size();) i = consume(words, kinds, i);
    check_exclusive_groups();
    if (!extras_.empty()) {
      std::string list;
      for (const auto& e : extras_) list += (list.empty() ? "" : " ") + e;
      fail("unrecognized arguments: " + list);
    }
    apply_values();
    return std::move(result_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw usage_error(usage_line(prog_) + "\n" + std::string(prog_) + ": error: " + message + "\n");
  }

  [[noreturn]] void fail(const flag_spec& spec, const std::string& message) const {
    std::string names;
    for (const auto& o : spec.options) names += (names.empty() ? "" : "/") + o;
    fail("argument " + names + ": " + message);
  }

  // Consumes the word at i (and the values it takes); returns the index of the next word.
  std::size_t consume(std::span<const std::string> words, const std::vector<classified>& kinds, std::size_t i) {
    const auto& c = kinds[i];
    // Megatron's parser has no positionals, so Python 3.11's argparse leaves "--" itself among the extras.
    if (c.kind != word_kind::option) { extras_.push_back(words[i]); return i + 1; }
    if (!c.spec) {
      if (c.option == "--pipeline-schedule") return program_value(words, kinds, i);
      if (!program_flag(c.option)) extras_.push_back(words[i]);
      return i + 1;
    }
    const auto& spec = *c.spec;
    if (!spec.takes_value()) {
      if (c.explicit_value) fail(spec, "ignored explicit argument " + python_str_repr(*c.explicit_value));
      store_flag(spec, c.option);
      return i + 1;
    }
    std::vector<std::string> values;
    std::size_t next = i + 1;
    if (c.explicit_value) {
      values.push_back(*c.explicit_value);
    } else {
      while (next < words.size() && kinds[next].kind == word_kind::argument) {
        values.push_back(words[next++]);
        if (spec.nargs == nargs_kind::one) break;
      }
    }
    if (values.empty() && spec.nargs == nargs_kind::one) fail(spec, "expected one argument");
    if (values.empty() && spec.nargs == nargs_kind::one_or_more) fail(spec, "expected at least one argument");
    store_values(spec, values);
    return next;
  }

  // mactor's --pipeline-schedule NAME (or =NAME), with argparse's messages.
  std::size_t program_value(std::span<const std::string> words, const std::vector<classified>& kinds, std::size_t i) {
    std::size_t next = i + 1;
    std::string value;
    if (kinds[i].explicit_value) {
      value = *kinds[i].explicit_value;
    } else if (next < words.size() && kinds[next].kind == word_kind::argument) {
      value = words[next++];
    } else {
      fail("argument --pipeline-schedule: expected one argument");
    }
    if (value != "1f1b" && value != "interleaved-1f1b" && value != "zb-h1" && value != "zbv" && value != "dualpipev")
      fail("argument --pipeline-schedule: invalid choice: " + python_str_repr(value) +
           " (choose from '1f1b', 'interleaved-1f1b', 'zb-h1', 'zbv', 'dualpipev')");
    result_.args.mactor.pipeline_schedule = value;
    return next;
  }

  bool program_flag(std::string_view option) {
    if (option == "-h" || option == "--help") return result_.program.help = true;
    if (option == "--dump-config") return result_.program.dump_config = true;
    if (option == "--flag-status") return result_.program.flag_status = true;
    return false;
  }

  void store_flag(const flag_spec& spec, const std::string& option) {
    bool value = spec.kind == value_kind::store_true;
    if (spec.kind == value_kind::boolean_optional) value = option.rfind("--no-", 0) != 0;
    record(spec, value);
  }

  void check_choice(const flag_spec& spec, const std::string& shown, const std::string& text) const {
    if (spec.choices.empty()) return;
    for (const auto& c : spec.choices)
      if (c == shown) return;
    std::string list;
    for (const auto& c : spec.choices) {
      const bool numeric = spec.kind == value_kind::int_value;
      list += (list.empty() ? "" : ", ") + (numeric ? c : python_str_repr(c));
    }
    fail(spec, "invalid choice: " + (spec.kind == value_kind::int_value ? shown : python_str_repr(text)) +
                   " (choose from " + list + ")");
  }

  template <class T>
  T convert(const flag_spec& spec, const std::string& text) const {
    auto invalid = [&] { fail(spec, "invalid " + type_name(spec.kind) + " value: " + python_str_repr(text)); };
    if constexpr (std::is_same_v<T, std::int64_t>) {
      auto v = parse_python_int(text);
      if (!v) invalid();
      check_choice(spec, std::to_string(*v), text);
      return *v;
    } else if constexpr (std::is_same_v<T, double>) {
      auto v = parse_python_float(text);
      if (!v) invalid();
      return *v;
    } else {
      check_choice(spec, text, text);
      return text;
    }
  }

  std::vector<std::int64_t> convert_tuple(const flag_spec& spec, const std::string& text) const {
    std::string body = text;
    while (!body.empty() && (body.front() == '(' || body.front() == ')')) body.erase(0, 1);
    while (!body.empty() && (body.back() == '(' || body.back() == ')')) body.pop_back();
    std::vector<std::int64_t> out;
    std::stringstream ss(body);
    std::string part;
    while (std::getline(ss, part, ',')) {
      auto v = parse_python_int(part);
      if (!v) fail(spec, "invalid tuple_type value: " + python_str_repr(text));
      out.push_back(*v);
    }
    if (body.empty() || body.back() == ',') fail(spec, "invalid tuple_type value: " + python_str_repr(text));
    return out;
  }

  int_or_list_value convert_freq(const flag_spec& spec, const std::string& text) const {
    const std::string name = spec.dest == "no_rope_freq" ? "no_rope_freq_type" : "moe_freq_type";
    std::optional<int_or_list_value> v;
    if (text.find('[') != std::string::npos) {
      v = evaluate_list_expression(text);
    } else if (auto i = parse_python_int(text)) {
      v = *i;
    }
    if (!v) fail(spec, "invalid " + name + " value: " + python_str_repr(text));
    return *v;
  }

  template <class T>
  flag_value convert_all(const flag_spec& spec, const std::vector<std::string>& values) const {
    if (spec.nargs == nargs_kind::one) return convert<T>(spec, values.front());
    std::vector<T> out;
    for (const auto& v : values) out.push_back(convert<T>(spec, v));
    return out;
  }

  void store_values(const flag_spec& spec, const std::vector<std::string>& values) {
    switch (spec.kind) {
      case value_kind::int_value: return record(spec, convert_all<std::int64_t>(spec, values));
      case value_kind::float_value: return record(spec, convert_all<double>(spec, values));
      case value_kind::python_bool: return record(spec, !values.front().empty());
      case value_kind::tuple_value: return record(spec, convert_tuple(spec, values.front()));
      case value_kind::freq_value: return record(spec, convert_freq(spec, values.front()));
      default: return record(spec, convert_all<std::string>(spec, values));
    }
  }

  void record(const flag_spec& spec, flag_value v) {
    values_[spec.dest] = std::move(v);
    seen_.push_back(&spec);
    result_.given.push_back(spec.dest);
  }

  // argparse's mutually exclusive groups: Megatron has one (the kitchen quantization flags).
  void check_exclusive_groups() const {
    const flag_spec* first = nullptr;
    for (const auto* s : seen_) {
      if (s->notes.find("mutually_exclusive_group_0") == std::string::npos) continue;
      if (first && first != s) fail(*s, "not allowed with argument " + first->options.front());
      first = s;
    }
  }

  void apply_values() {
    for_each_flag_field(
        [&](std::string_view dest, auto& field) {
          auto it = values_.find(std::string(dest));
          if (it == values_.end()) return;
          std::visit(
              [&](const auto& v) {
                if constexpr (std::is_assignable_v<decltype(field)&, decltype(v)>) {
                  field = v;
                } else {
                  throw std::logic_error("flag table and args.hpp disagree on the type of " + std::string(dest));
                }
              },
              it->second);
        },
        static_cast<flag_args&>(result_.args));
  }

  std::string_view prog_;
  parsed_command_line result_;
  std::map<std::string, flag_value> values_;
  std::vector<const flag_spec*> seen_;
  std::vector<std::string> extras_;
};

}  // namespace

parsed_command_line parse_command_line(std::span<const std::string> arguments, std::string_view prog) {
  return parser(prog).run(arguments);
}

std::string usage_line(std::string_view prog) {
  return "usage: " + std::string(prog) + " [-h] [--dump-config] [--flag-status] [MEGATRON FLAGS ...]";
}

std::string help_text(std::string_view prog) {
  std::ostringstream out;
  out << usage_line(prog) << "\n\nmactor's pretrain_gpt: Megatron-LM core_v0.15.0's pretrain_gpt.py flags.\n"
      << "\noptions:\n"
      << "  -h, --help            show this help message and exit\n"
      << "  --dump-config         print the resolved configuration as JSON and exit\n"
      << "  --flag-status         print every flag's support status in mactor and exit\n";
  const auto& groups = flag_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    out << "\n" << groups[g].name << " (" << groups[g].function << "):\n";
    for (const auto& s : flag_specs()) {
      if (s.group != static_cast<int>(g)) continue;
      std::string names;
      for (const auto& o : s.options) names += (names.empty() ? "" : ", ") + o;
      if (s.takes_value()) {
        std::string meta = s.dest;
        for (auto& ch : meta) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        names += s.nargs == nargs_kind::one ? " " + meta : " " + meta + " [" + meta + " ...]";
      }
      out << "  " << names << "\n      default: " << s.default_repr;
      if (!s.choices.empty()) {
        out << "; choices:";
        for (const auto& c : s.choices) out << " " << c;
      }
      if (s.deprecated == deprecation::removed) out << "; deprecated in Megatron";
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace mactor::config
