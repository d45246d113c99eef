// The parsed flags as the one message every actor receives (CAF-free header: include actors/type_ids.hpp to send it).
#pragma once

#include "config/megatron_args.hpp"

namespace mactor::actors {

/// Megatron's validated args, sent by the coordinator to every actor at start-up.
struct config_message {
  config::megatron_args args;
};

}  // namespace mactor::actors
