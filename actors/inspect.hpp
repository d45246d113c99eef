// CAF inspect overloads for mactor's messages; include only from .cpp files that already include CAF.
#pragma once

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <stdexcept>
#include <string>

#include "actors/config_message.hpp"
#include "config/config_json.hpp"

namespace mactor::actors {

/// The config travels as its JSON text: every field keyed by its Megatron dest, doubles with 17
/// significant digits (exact), and strings on CAF's memcpy path. Receivers rebuild the typed struct.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, config_message& x) {
  std::string wire;
  if constexpr (Inspector::reads_state) wire = config::to_json(x.args, -1);
  auto rebuild = [&]() -> caf::error {
    try {
      x.args = config::from_json(wire);
    } catch (const std::exception&) {
      return caf::make_error(caf::sec::invalid_argument);
    }
    return caf::none;
  };
  return f(caf::meta::type_name("mactor::config_message"), wire, caf::meta::load_callback(rebuild));
}

}  // namespace mactor::actors
