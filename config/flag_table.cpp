// Lookups over the generated flag table.
#include "config/flag_table.hpp"

#include <unordered_map>

namespace mactor::config {
namespace {

using spec_index = std::unordered_map<std::string_view, const flag_spec*>;

const spec_index& option_index() {
  static const spec_index index = [] {
    spec_index m;
    for (const auto& s : flag_specs())
      for (const auto& o : s.options) m.emplace(o, &s);
    return m;
  }();
  return index;
}

const spec_index& dest_index() {
  static const spec_index index = [] {
    spec_index m;
    for (const auto& s : flag_specs()) m.emplace(s.dest, &s);  // first registration wins
    return m;
  }();
  return index;
}

const flag_spec* lookup(const spec_index& m, std::string_view key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : it->second;
}

}  // namespace

const flag_spec* find_flag(std::string_view option) { return lookup(option_index(), option); }
const flag_spec* find_dest(std::string_view dest) { return lookup(dest_index(), dest); }

}  // namespace mactor::config
