// The values a torch checkpoint's pickle holds, as one tree: Python's None, bool, int, float, str,
// bytes, list, tuple, dict (an OrderedDict too), tensors (torch._utils._rebuild_tensor_v2 over a
// storage of the zip), classes (GLOBAL) and plain objects (argparse.Namespace and anything else
// the unpickler does not know: kept opaque, so a Megatron checkpoint's numpy RNG state loads).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mactor::checkpoint {

/// A tensor's element type, by torch's name ("float32", "bfloat16", "float16", "int64", ...).
struct torch_dtype {
  const char* name;         ///< torch.float32 -> "float32"
  const char* storage;      ///< the legacy storage class torch pickles: "FloatStorage"
  int item_size;
};
/// nullptr when unknown.
const torch_dtype* dtype_by_name(const std::string& name);
const torch_dtype* dtype_by_storage(const std::string& storage_class);

/// A dense row-major tensor with its own bytes (little-endian, dtype's item size each).
struct torch_tensor {
  const torch_dtype* dtype = nullptr;
  std::vector<std::int64_t> shape;
  std::string bytes;
};

struct pickle_value {
  enum class kind { none, boolean, integer, real, text, bytes, list, tuple, dict, tensor, global, object };
  kind k = kind::none;
  bool b = false;
  std::int64_t i = 0;
  double d = 0;
  std::string s;            ///< text, bytes; "module.name" of a global; an object's class
  std::vector<pickle_value> items;  ///< list, tuple; an opaque object's [callable args..., state]
  std::vector<std::pair<pickle_value, pickle_value>> entries;  ///< dict; an object's attributes
  bool ordered = false;     ///< dict: an OrderedDict (as torch state_dicts are)
  std::shared_ptr<torch_tensor> tensor;

  static pickle_value none() { return {}; }
  static pickle_value boolean(bool v);
  static pickle_value integer(std::int64_t v);
  static pickle_value real(double v);
  static pickle_value text(std::string v);
  static pickle_value list(std::vector<pickle_value> v = {});
  static pickle_value tuple(std::vector<pickle_value> v = {});
  static pickle_value dict(bool ordered = false);
  static pickle_value of_tensor(std::shared_ptr<torch_tensor> t);
  /// An object of class "module.name" whose attributes (__dict__) are `entries`.
  static pickle_value object(std::string class_name);

  bool is(kind want) const { return k == want; }
  /// dict/object entry under a string (or integer) key; nullptr when absent.
  const pickle_value* find(const std::string& key) const;
  const pickle_value* find(std::int64_t key) const;
  /// Adds (or replaces) entry `key`; returns the value.
  pickle_value& set(const std::string& key, pickle_value v);
  pickle_value& set(std::int64_t key, pickle_value v);
  /// A number as double (bool, int or float), else throws std::runtime_error naming `what`.
  double number(const std::string& what) const;
};

}  // namespace mactor::checkpoint
