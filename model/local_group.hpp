// An in-process group: N ranks that are threads of one process, meeting at a barrier and
// reading each other's buffers. Used to check tensor-parallel models against tp=1.
#pragma once
#include <memory>
#include <vector>

#include "model/group.hpp"

namespace mactor::model {

/// size groups sharing one rendezvous; rank i must be driven by its own thread.
std::vector<std::unique_ptr<group>> make_local_groups(int size);

}  // namespace mactor::model
