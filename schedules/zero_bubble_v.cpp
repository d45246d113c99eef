// ZB-V: the V-shaped zero-bubble order of one rank, then its transfers.
#include "schedules/zero_bubble_v.hpp"

#include <algorithm>

#include "schedules/v_transfers.hpp"

namespace mactor::schedules {
namespace {

// Appends the compute actions of one rank for n micro-batches (n >= 2p - 1), counting per chunk.
class v_order {
 public:
  v_order(int pp, int rank, int n) : p_(pp), r_(rank), n_(n) {}

  std::vector<action> build() {
    for (int i = 0; i < 2 * (p_ - r_) - 1; ++i) forward(0);
    for (int i = 0; i < r_; ++i) forward(1), forward(0);
    for (int i = 0; i < p_ - r_; ++i) forward(1), input_grad(1), weight_grad(1);
    while (f_[1] < f_[0] || f_[0] < n_) {
      if (f_[0] < n_) forward(0);
      input_grad(0), weight_grad(0);
      forward(1), input_grad(1), weight_grad(1);
    }
    for (int i = 0; i < r_; ++i) input_grad(0), input_grad(1);
    for (int i = 0; i < p_ - r_; ++i) input_grad(0), weight_grad(0);
    while (w_[1] < b_[1]) weight_grad(1);
    while (w_[0] < b_[0]) weight_grad(0);
    return std::move(out_);
  }

 private:
  void forward(int chunk) { out_.push_back({op::forward, f_[chunk]++, chunk}); }
  void input_grad(int chunk) { out_.push_back({op::backward, b_[chunk]++, chunk}); }
  void weight_grad(int chunk) { out_.push_back({op::backward_weight, w_[chunk]++, chunk}); }

  int p_, r_, n_;
  int f_[2] = {0, 0}, b_[2] = {0, 0}, w_[2] = {0, 0};
  std::vector<action> out_;
};

}  // namespace

std::vector<action> zero_bubble_v_compute(const schedule_shape& s) {
  const int p = s.pipeline_model_parallel_size;
  return for_shape(s, v_order(p, s.pipeline_rank, std::max(s.num_microbatches, 2 * p - 1)).build());
}

generator<action> zero_bubble_v(schedule_shape s) {
  auto compute = zero_bubble_v_compute(s);
  return with_v_transfers(std::move(s), std::move(compute));
}

}  // namespace mactor::schedules
