// One array of a dataset index held in the dtype Megatron saves it in: 32 bits (int32 sample
// index, uint32 shuffle index) unless its values need 64. Numpy holds these narrow; held as int64
// they doubled every rank's index memory (the mock dataset's reach hundreds of MB per rank at
// short sequences), and writing them cost the page faults.
#pragma once
#include <cstddef>
#include <cstdint>
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

  bool wide() const { return wide_; }
  std::size_t size() const { return wide_ ? wide_values_.size() : narrow_values_.size(); }
  std::int64_t operator[](std::size_t i) const {
    return wide_ ? wide_values_[i] : static_cast<std::int64_t>(narrow_values_[i]);
  }
  void set(std::size_t i, std::int64_t v) {
    if (wide_)
      wide_values_[i] = v;
    else
      narrow_values_[i] = static_cast<Narrow>(v);
  }
  const void* data() const {
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
};

}  // namespace mactor::data
