// pickle_value's constructors and look-ups, and the dtype table torch's storages name.
#include "checkpoint/pickle_value.hpp"

#include <stdexcept>

namespace mactor::checkpoint {
namespace {

constexpr torch_dtype dtypes[] = {
    {"float32", "FloatStorage", 4}, {"float64", "DoubleStorage", 8}, {"float16", "HalfStorage", 2},
    {"bfloat16", "BFloat16Storage", 2}, {"int64", "LongStorage", 8}, {"int32", "IntStorage", 4},
    {"int16", "ShortStorage", 2}, {"int8", "CharStorage", 1}, {"uint8", "ByteStorage", 1},
    {"bool", "BoolStorage", 1},
};

}  // namespace

const torch_dtype* dtype_by_name(const std::string& name) {
  for (const auto& d : dtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const torch_dtype* dtype_by_storage(const std::string& storage_class) {
  for (const auto& d : dtypes)
    if (storage_class == d.storage) return &d;
  return nullptr;
}

pickle_value pickle_value::boolean(bool v) {
  pickle_value p;
  p.k = kind::boolean;
  p.b = v;
  return p;
}
pickle_value pickle_value::integer(std::int64_t v) {
  pickle_value p;
  p.k = kind::integer;
  p.i = v;
  return p;
}
pickle_value pickle_value::real(double v) {
  pickle_value p;
  p.k = kind::real;
  p.d = v;
  return p;
}
pickle_value pickle_value::text(std::string v) {
  pickle_value p;
  p.k = kind::text;
  p.s = std::move(v);
  return p;
}
pickle_value pickle_value::list(std::vector<pickle_value> v) {
  pickle_value p;
  p.k = kind::list;
  p.items = std::move(v);
  return p;
}
pickle_value pickle_value::tuple(std::vector<pickle_value> v) {
  pickle_value p;
  p.k = kind::tuple;
  p.items = std::move(v);
  return p;
}
pickle_value pickle_value::dict(bool ordered) {
  pickle_value p;
  p.k = kind::dict;
  p.ordered = ordered;
  return p;
}
pickle_value pickle_value::of_tensor(std::shared_ptr<torch_tensor> t) {
  pickle_value p;
  p.k = kind::tensor;
  p.tensor = std::move(t);
  return p;
}
pickle_value pickle_value::object(std::string class_name) {
  pickle_value p;
  p.k = kind::object;
  p.s = std::move(class_name);
  return p;
}

const pickle_value* pickle_value::find(const std::string& key) const {
  for (const auto& [k2, v] : entries)
    if (k2.k == kind::text && k2.s == key) return &v;
  return nullptr;
}

const pickle_value* pickle_value::find(std::int64_t key) const {
  for (const auto& [k2, v] : entries)
    if (k2.k == kind::integer && k2.i == key) return &v;
  return nullptr;
}

pickle_value& pickle_value::set(const std::string& key, pickle_value v) {
  for (auto& [k2, old] : entries)
    if (k2.k == kind::text && k2.s == key) return old = std::move(v);
  entries.emplace_back(text(key), std::move(v));
  return entries.back().second;
}

pickle_value& pickle_value::set(std::int64_t key, pickle_value v) {
  for (auto& [k2, old] : entries)
    if (k2.k == kind::integer && k2.i == key) return old = std::move(v);
  entries.emplace_back(integer(key), std::move(v));
  return entries.back().second;
}

double pickle_value::number(const std::string& what) const {
  switch (k) {
    case kind::boolean: return b ? 1 : 0;
    case kind::integer: return static_cast<double>(i);
    case kind::real: return d;
    default: throw std::runtime_error(what + " is not a number");
  }
}

}  // namespace mactor::checkpoint
