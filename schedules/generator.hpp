// A small C++20 generator: a coroutine that yields values one at a time to whoever pulls them.
// C++20 has no std::generator; schedules use this one to hand actions to a port (see README.md).
#pragma once

#include <coroutine>
#include <exception>
#include <iterator>
#include <optional>
#include <utility>

namespace mactor::schedules {

/// A lazily evaluated sequence produced by a coroutine that `co_yield`s values of type T.
///
/// The coroutine starts suspended and runs only inside `next()` (or `++` on the iterator), on the
/// caller's thread, up to its next `co_yield`. That is what lets an actor own a schedule: it pulls
/// the next action only from its own message handler, once the previous action has finished.
/// Move-only. An exception thrown by the coroutine body is rethrown from `next()`.
///
/// Coroutines returning a generator must take their parameters by value (STYLE.md §4): the frame
/// outlives the call expression, so a reference parameter can dangle.
template <class T>
class [[nodiscard]] generator {
 public:
  struct promise_type {
    std::optional<T> current_;
    std::exception_ptr error_;

    generator get_return_object() {
      return generator{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    // Takes the value by copy: a yielded temporary dies before the consumer reads it.
    std::suspend_always yield_value(T value) {
      current_.emplace(std::move(value));
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error_ = std::current_exception(); }
    // A generator never awaits anything; forbid co_await inside it.
    template <class U>
    std::suspend_never await_transform(U&&) = delete;
  };

  using handle_type = std::coroutine_handle<promise_type>;

  generator() = default;
  explicit generator(handle_type h) noexcept : handle_(h) {}
  generator(generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  generator& operator=(generator&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  generator(const generator&) = delete;
  generator& operator=(const generator&) = delete;
  ~generator() { reset(); }

  /// Runs the coroutine to its next `co_yield` and returns that value, or nullopt once the
  /// coroutine has finished. Rethrows whatever the coroutine body threw.
  std::optional<T> next() {
    if (!handle_ || handle_.done()) return std::nullopt;
    handle_.promise().current_.reset();
    handle_.resume();
    if (handle_.promise().error_) std::rethrow_exception(handle_.promise().error_);
    if (handle_.done()) return std::nullopt;
    return std::move(handle_.promise().current_);
  }

  /// Input iterator, so a generator works in a range-for. Pulls lazily, like `next()`.
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using value_type = T;

    iterator() = default;
    explicit iterator(generator* owner) : owner_(owner) { advance(); }
    const T& operator*() const { return *value_; }
    const T* operator->() const { return &*value_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    bool operator==(std::default_sentinel_t) const { return !value_.has_value(); }

   private:
    void advance() { value_ = owner_->next(); }
    generator* owner_ = nullptr;
    std::optional<T> value_;
  };

  iterator begin() { return iterator{this}; }
  std::default_sentinel_t end() const { return {}; }

 private:
  void reset() {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  handle_type handle_;
};

}  // namespace mactor::schedules
