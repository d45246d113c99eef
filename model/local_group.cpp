// In-process collectives: post a pointer, barrier, read the others, barrier.
#include "model/local_group.hpp"

#include <barrier>
#include <cstring>
#include <stdexcept>

namespace mactor::model {
namespace {

struct rendezvous {
  explicit rendezvous(int n) : size(n), posted(n), posted_counts(n), sync(n) {}
  int size;
  std::vector<const void*> posted;
  std::vector<const std::size_t*> posted_counts;  // all_to_all_v: each rank's send counts
  std::barrier<> sync;
};

class local_group final : public group {
 public:
  local_group(std::shared_ptr<rendezvous> r, int rank) : r_(std::move(r)), rank_(rank) {}
  int size() const override { return r_->size; }
  int rank() const override { return rank_; }
  void all_reduce_sum(float* d, std::size_t n) override { reduce(d, n); }
  void all_reduce_sum(double* d, std::size_t n) override { reduce(d, n); }
  void all_gather(const float* in, float* out, std::size_t n) override { gather(in, out, n); }
  void all_gather(const double* in, double* out, std::size_t n) override { gather(in, out, n); }
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override {
    scatter(in, out, n);
  }
  void reduce_scatter_sum(const double* in, double* out, std::size_t n) override {
    scatter(in, out, n);
  }
  void all_to_all_v_bytes(const std::byte* in, std::span<const std::size_t> send_bytes, std::byte* out,
                          std::span<const std::size_t> recv_bytes) override {
    r_->posted[rank_] = in;
    r_->posted_counts[rank_] = send_bytes.data();
    r_->sync.arrive_and_wait();
    std::size_t at = 0;
    for (int q = 0; q < r_->size; ++q) {
      const std::size_t* counts = r_->posted_counts[q];
      std::size_t from = 0;
      for (int j = 0; j < rank_; ++j) from += counts[j];
      if (counts[rank_] != recv_bytes[q]) throw std::logic_error("local_group::all_to_all_v: counts disagree");
      std::memcpy(out + at, static_cast<const std::byte*>(r_->posted[q]) + from, recv_bytes[q]);
      at += recv_bytes[q];
    }
    r_->sync.arrive_and_wait();
  }

 private:
  // Sums in rank order on every rank, so all ranks get bitwise the same result.
  template <typename T>
  void reduce(T* data, std::size_t n) {
    std::vector<T> sum(n, T(0));
    r_->posted[rank_] = data;
    r_->sync.arrive_and_wait();
    for (int q = 0; q < r_->size; ++q) {
      const T* other = static_cast<const T*>(r_->posted[q]);
      for (std::size_t i = 0; i < n; ++i) sum[i] += other[i];
    }
    r_->sync.arrive_and_wait();
    std::memcpy(data, sum.data(), n * sizeof(T));
  }
  template <typename T>
  void gather(const T* in, T* out, std::size_t n) {
    r_->posted[rank_] = in;
    r_->sync.arrive_and_wait();
    for (int q = 0; q < r_->size; ++q)
      std::memcpy(out + q * n, static_cast<const T*>(r_->posted[q]), n * sizeof(T));
    r_->sync.arrive_and_wait();
  }
  template <typename T>
  void scatter(const T* in, T* out, std::size_t n) {
    std::vector<T> sum(n, T(0));
    r_->posted[rank_] = in;
    r_->sync.arrive_and_wait();
    for (int q = 0; q < r_->size; ++q) {
      const T* other = static_cast<const T*>(r_->posted[q]) + rank_ * n;
      for (std::size_t i = 0; i < n; ++i) sum[i] += other[i];
    }
    r_->sync.arrive_and_wait();
    std::memcpy(out, sum.data(), n * sizeof(T));
  }

  std::shared_ptr<rendezvous> r_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<group>> make_local_groups(int size) {
  auto r = std::make_shared<rendezvous>(size);
  std::vector<std::unique_ptr<group>> groups;
  for (int i = 0; i < size; ++i) groups.push_back(std::make_unique<local_group>(r, i));
  return groups;
}

}  // namespace mactor::model
