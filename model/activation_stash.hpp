// What a chunk's layers keep from one micro-batch's forward for its backward, moved out of the
// layers while another micro-batch's forward runs, and moved back for the backward: Megatron
// keeps every in-flight micro-batch's activations; the layers hold one set, so the others wait
// here. Each layer names its fields once, in carry(): while the stash is filled they move in,
// once taking has begun they move back out, in the same order (a FIFO of boxes of any movable
// type).
#pragma once

#include <deque>
#include <memory>
#include <stdexcept>
#include <utility>

namespace mactor::model {

class activation_stash {
 public:
  /// Moves each field in, or back out once start_taking() was called, in order.
  template <class... T>
  void carry(T&... fields) {
    (carry_one(fields), ...);
  }
  /// Ends the filling: carry() now moves the fields back out.
  void start_taking() { taking_ = true; }
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
  void carry_one(T& field) {
    if (!taking_) {
      boxes_.push_back(std::make_unique<box<T>>(std::move(field)));
      return;
    }
    if (boxes_.empty()) throw std::logic_error("activation_stash: taken more than was put");
    auto* b = dynamic_cast<box<T>*>(boxes_.front().get());
    if (!b) throw std::logic_error("activation_stash: taken in another order than put");
    field = std::move(b->value);
    boxes_.pop_front();
  }
  bool taking_ = false;
  std::deque<std::unique_ptr<base>> boxes_;
};

}  // namespace mactor::model
