// The one place where mactor's message types and atoms are made known to CAF.
#pragma once

#include <caf/fwd.hpp>

namespace mactor::actors {

/// Registers every mactor message type with an actor system's config (call before constructing the system).
void register_message_types(caf::actor_system_config& cfg);

}  // namespace mactor::actors
