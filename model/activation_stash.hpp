// What a chunk's layers keep from one micro-batch's forward for its backward, moved out of the
// layers while another micro-batch's forward runs, and moved back for the backward: Megatron
// keeps every in-flight micro-batch's activations; the layers hold one set, so the others wait
// here. Values go in and come out in the same order (a FIFO of boxes of any movable type).
#pragma once

#include <deque>
#include <memory>
#include <stdexcept>
#include <utility>

namespace mactor::model {

class activation_stash {
 public:
  /// Moves each field in, in order.
  template <class... T>
  void put(T&... fields) {
    (boxes_.push_back(std::make_unique<box<T>>(std::move(fields))), ...);
  }
  /// Moves each field back out, in the order put() took them.
  template <class... T>
  void take(T&... fields) {
    (take_one(fields), ...);
  }
  bool empty() const { return boxes_.empty(); }

 private:
  struct base {
    virtual ~base() = default;
  };
  template <class T>
  struct box : base {
    explicit box(T&& v) : value(std::move(v)) {}
    T value;
  };
  template <class T>
  void take_one(T& field) {
    if (boxes_.empty()) throw std::logic_error("activation_stash: taken more than was put");
    auto* b = dynamic_cast<box<T>*>(boxes_.front().get());
    if (!b) throw std::logic_error("activation_stash: taken in another order than put");
    field = std::move(b->value);
    boxes_.pop_front();
  }
  std::deque<std::unique_ptr<base>> boxes_;
};

}  // namespace mactor::model
