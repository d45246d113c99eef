// The thread's current stream.
#include "tensor/cuda/current_stream.hpp"

namespace mactor::cuda {

namespace {
thread_local stream_handle current = nullptr;
}  // namespace

stream_handle current_stream() { return current; }

stream_scope::stream_scope(stream_handle s) : previous_(current) { current = s; }

stream_scope::~stream_scope() { current = previous_; }

}  // namespace mactor::cuda
