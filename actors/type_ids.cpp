// Registration of mactor's message types with CAF.
#include "actors/type_ids.hpp"

#include <caf/all.hpp>

#include "actors/inspect.hpp"

namespace mactor::actors {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<config_message>("mactor::config_message");
}

}  // namespace mactor::actors
