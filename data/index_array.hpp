// One array of a dataset index held in the dtype Megatron saves it in: 32 bits (int32 sample
// index, uint32 shuffle index) unless its values need 64. Numpy holds these narrow; held as int64
// they doubled every rank's index memory (the mock dataset's reach hundreds of MB per rank at
// short sequences), and writing them cost the page faults. An array loaded from a cache file may
// stay in the file's read-only mapping, shared by every rank of the host (as numpy's mmap_mode).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mactor::data {

template <typename Narrow>
class index_array {
 public:
  index_array() = default;
  index_array(std::size_t n, bool wide) : wide_(wide) {
    if (wide)
      wide_values_.resize(n);
    else
      narrow_values_.resize(n);
  }
  /// From values already read (a cache file's), kept wide or narrowed.
  static index_array from_values(const std::vector<std::int64_t>& v, bool wide) {
    index_array a(v.size(), wide);
    for (std::size_t i = 0; i < v.size(); ++i) a.set(i, v[i]);
    return a;
  }

  /// `n` values at `data` in a mapping `hold` keeps alive (read-only: set() must not be called).
  static index_array mapped(std::shared_ptr<const void> hold, const void* data, std::size_t n, bool wide) {
    index_array a;
    a.wide_ = wide;
    a.hold_ = std::move(hold);
    a.mapped_ = data;
    a.mapped_size_ = n;
    return a;
  }

  bool wide() const { return wide_; }
  std::size_t size() const {
    if (hold_) return mapped_size_;
    return wide_ ? wide_values_.size() : narrow_values_.size();
  }
  std::int64_t operator[](std::size_t i) const {
    if (hold_)
      return wide_ ? static_cast<const std::int64_t*>(mapped_)[i]
                   : static_cast<std::int64_t>(static_cast<const Narrow*>(mapped_)[i]);
    return wide_ ? wide_values_[i] : static_cast<std::int64_t>(narrow_values_[i]);
  }
  void set(std::size_t i, std::int64_t v) {
    if (wide_)
      wide_values_[i] = v;
    else
      narrow_values_[i] = static_cast<Narrow>(v);
  }
  const void* data() const {
    if (hold_) return mapped_;
    return wide_ ? static_cast<const void*>(wide_values_.data()) : static_cast<const void*>(narrow_values_.data());
  }
  std::size_t bytes() const { return size() * (wide_ ? sizeof(std::int64_t) : sizeof(Narrow)); }
  std::vector<std::int64_t> values() const {
    std::vector<std::int64_t> v(size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = (*this)[i];
    return v;
  }
  /// The storage, for filling in place (only the one wide() names is used).
  std::vector<Narrow>& narrow_values() { return narrow_values_; }
  std::vector<std::int64_t>& wide_values() { return wide_values_; }

 private:
  bool wide_ = false;
  std::vector<Narrow> narrow_values_;
  std::vector<std::int64_t> wide_values_;
  std::shared_ptr<const void> hold_;  // set when the values are a mapping's
  const void* mapped_ = nullptr;
  std::size_t mapped_size_ = 0;
};

}  // namespace mactor::data
