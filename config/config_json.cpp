// JSON and Python-style printing of megatron_args, driven by the generated field visitor.
#include "config/config_json.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "config/python_text.hpp"

namespace mactor::config {
namespace {

using json = nlohmann::ordered_json;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_variant : std::false_type {};
template <class... T>
struct is_variant<std::variant<T...>> : std::true_type {};

template <class T>
json to_json_value(const T& v) {
  if constexpr (is_optional<T>::value) {
    return v ? to_json_value(*v) : json(nullptr);
  } else if constexpr (is_variant<T>::value) {
    return std::visit([](const auto& x) { return to_json_value(x); }, v);
  } else {
    return json(v);
  }
}

template <class T>
void from_json_value(const json& j, T& out, std::string_view key) {
  if constexpr (is_optional<T>::value) {
    if (j.is_null()) { out.reset(); return; }
    typename T::value_type inner{};
    from_json_value(j, inner, key);
    out = std::move(inner);
  } else if constexpr (is_variant<T>::value) {
    // int_or_list / one_or_many: a JSON array is the list alternative, anything else the scalar.
    using scalar = std::variant_alternative_t<0, T>;
    using list = std::variant_alternative_t<1, T>;
    if (j.is_array()) out = j.get<list>();
    else out = j.get<scalar>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!j.is_number()) throw std::runtime_error("config key '" + std::string(key) + "' must be a number");
    out = j.get<double>();
  } else {
    out = j.get<T>();
  }
}

template <class T>
std::string python_str(const T& v, bool nested = false);

template <class T>
std::string python_list(const std::vector<T>& v, char open = '[', char close = ']') {
  std::string s(1, open);
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + python_str(v[i], true);
  if (open == '(' && v.size() == 1) s += ",";
  return s + close;
}

template <class T>
std::string python_str(const T& v, bool nested) {
  if constexpr (is_optional<T>::value) {
    return v ? python_str(*v, nested) : "None";
  } else if constexpr (is_variant<T>::value) {
    return std::visit([&](const auto& x) { return python_str(x, nested); }, v);
  } else if constexpr (is_vector<T>::value) {
    return python_list(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_same_v<T, double>) {
    return python_float_repr(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return nested ? python_str_repr(v) : v;
  } else {
    return std::to_string(v);
  }
}

// The derived values, in the order Megatron sets them on args; D is derived_args or const derived_args.
template <class F, class D>
void for_each_derived(F&& f, D& d) {
  f("rank", d.rank);
  f("world_size", d.world_size);
  f("data_parallel_size", d.data_parallel_size);
  f("transformer_pipeline_model_parallel_size", d.transformer_pipeline_model_parallel_size);
  f("virtual_pipeline_model_parallel_size", d.virtual_pipeline_model_parallel_size);
  f("num_microbatches", d.num_microbatches);
  f("params_dtype", d.params_dtype);
  f("use_dist_ckpt", d.use_dist_ckpt);
  f("variable_seq_lengths", d.variable_seq_lengths);
  f("consumed_train_samples", d.consumed_train_samples);
  f("skipped_train_samples", d.skipped_train_samples);
  f("consumed_valid_samples", d.consumed_valid_samples);
}

// Attributes validate_args deletes from Megatron's args before they are printed.
bool deleted_by_megatron(std::string_view dest) {
  return dest == "batch_size" || dest == "warmup" || dest == "model_parallel_size" || dest == "checkpoint_activations" ||
         dest == "recompute_activations";
}

}  // namespace

std::string to_json(const megatron_args& args, int indent) {
  json j = json::object();
  auto put = [&](std::string_view key, const auto& value) { j[std::string(key)] = to_json_value(value); };
  for_each_flag_field(put, static_cast<const flag_args&>(args));
  for_each_derived(put, args.derived);
  j["mactor_pipeline_schedule"] = args.mactor.pipeline_schedule;
  return j.dump(indent);
}

megatron_args from_json(const std::string& text) {
  const json j = json::parse(text);
  megatron_args args;
  auto get = [&](std::string_view key, auto& field) {
    auto it = j.find(std::string(key));
    if (it == j.end()) throw std::runtime_error("config JSON has no key '" + std::string(key) + "'");
    from_json_value(*it, field, key);
  };
  for_each_flag_field(get, static_cast<flag_args&>(args));
  for_each_derived(get, args.derived);
  // mactor's own flags: absent from a config written before they existed.
  if (auto it = j.find("mactor_pipeline_schedule"); it != j.end()) args.mactor.pipeline_schedule = it->get<std::string>();
  return args;
}

std::vector<std::pair<std::string, std::string>> argument_strings(const megatron_args& args) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](std::string_view key, const auto& value) {
    if (!deleted_by_megatron(key)) out.emplace_back(std::string(key), python_str(value));
  };
  for_each_flag_field(add, static_cast<const flag_args&>(args));
  for_each_derived(add, args.derived);
  return out;
}

std::string python_list_str(const std::vector<std::int64_t>& values) { return python_list(values); }

std::string arguments_block(const megatron_args& args) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : argument_strings(args)) {
    const std::size_t dots = key.size() < 48 ? 48 - key.size() : 0;
    lines.push_back("  " + key + " " + std::string(dots, '.') + " " + value);
  }
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  std::stable_sort(lines.begin(), lines.end(), [&](const auto& a, const auto& b) { return lower(a) < lower(b); });
  std::string out = "------------------------ arguments ------------------------\n";
  for (const auto& l : lines) out += l + "\n";
  out += "-------------------- end of arguments ---------------------\n";
  return out;
}

}  // namespace mactor::config
