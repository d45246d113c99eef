// The thread's default device.
#include "tensor/default_device.hpp"

namespace mactor::tensor {

namespace {
thread_local device current = cpu;
}  // namespace

device default_device() { return current; }

default_device_scope::default_device_scope(device where) : previous_(current) { current = where; }

default_device_scope::~default_device_scope() { current = previous_; }

}  // namespace mactor::tensor
