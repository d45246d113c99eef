// Python's json.dumps(obj, indent=4) for cache descriptions, so that their md5 names match.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace mactor::data {

/// Python's repr() of a float ("0.949", "1.0", "1e-05", "inf" as "Infinity" in JSON).
std::string py_float_repr(double v);
/// json.dumps(value, indent=4) with Python's defaults (ensure_ascii, ", " / ": " separators).
std::string py_json_dumps(const nlohmann::ordered_json& value);

}  // namespace mactor::data
