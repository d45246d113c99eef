// CUDA streams and events as owning handles. A stream orders the kernels and copies queued on
// it; an event marks a point in a stream that another stream can wait for or the host can poll
// (the stage actor polls instead of blocking its scheduler thread in cudaStreamSynchronize).
#pragma once

struct CUstream_st;
struct CUevent_st;

namespace mactor::cuda {

/// CUDA's stream handle (cudaStream_t) without CUDA's headers; nullptr is the default stream.
using stream_handle = CUstream_st*;

/// An owned non-blocking stream on the current device.
class stream {
 public:
  stream();
  ~stream();
  stream(stream&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  stream_handle handle() const { return handle_; }
  operator stream_handle() const { return handle_; }
  /// Blocks the calling thread until everything queued has run (tests and shutdown only).
  void synchronize() const;

 private:
  stream_handle handle_ = nullptr;
};

/// An owned event without timing.
class event {
 public:
  event();
  ~event();
  event(event&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// Marks the current end of `s`.
  void record(stream_handle s);
  /// True once the work before the last record() has run; never blocks.
  bool ready() const;
  /// Makes `s` wait for the recorded point without blocking the host.
  void make_wait(stream_handle s) const;
  void synchronize() const;

 private:
  CUevent_st* handle_ = nullptr;
};

}  // namespace mactor::cuda
