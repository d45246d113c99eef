// DualPipeV: the order of one rank in DualPipe's eight steps, then its transfers.
#include "schedules/dual_pipe_v.hpp"

#include <algorithm>
#include <deque>

#include "schedules/v_transfers.hpp"

namespace mactor::schedules {
namespace {

// Appends one rank's compute actions for n >= 2p micro-batches, counting per chunk; weight passes
// of zero-bubble backwards wait in a queue, oldest first.
class dual_pipe_v_order {
 public:
  dual_pipe_v_order(int pp, int rank, int n) : p_(pp), r_(rank), n_(n) {}

  std::vector<action> build() {
    const int p = p_, r = r_;
    for (int i = 0; i < 2 * (p - r - 1); ++i) forward(0);
    for (int i = 0; i < r + 1; ++i) forward(0), forward(1);
    for (int i = 0; i < p - r - 1; ++i) backward(1, true), weight(), forward(1);
    for (int i = 0; i < n_ - 2 * p + r + 1; ++i) forward(0), backward(1, false), forward(1), backward(0, false);
    for (int i = 0; i < p - r - 1; ++i) backward(1, false), forward(1), backward(0, false);
    cool_down_pairs();
    for (int i = 0; i < p - r - 1; ++i) weight(), backward(0, true);
    while (!queued_.empty()) weight();
    return std::move(out_);
  }

 private:
  // Step 6: (r + 1) pairs (B1 B0); from the middle pair on their weight passes wait, from its B1
  // on odd ranks and from its B0 on even ones.
  void cool_down_pairs() {
    const int pairs = r_ + 1;
    bool zero_bubble = false;
    for (int i = 0; i < pairs; ++i) {
      if (i == pairs / 2 && r_ % 2 == 1) zero_bubble = true;
      backward(1, zero_bubble);
      if (i == pairs / 2 && r_ % 2 == 0) zero_bubble = true;
      backward(0, zero_bubble);
    }
  }
  void forward(int chunk) { out_.push_back({op::forward, f_[chunk]++, chunk}); }
  void backward(int chunk, bool zero_bubble) {
    const action b{op::backward, b_[chunk]++, chunk};
    out_.push_back(b);
    const action w{op::backward_weight, b.microbatch, chunk};
    if (zero_bubble)
      queued_.push_back(w);
    else
      out_.push_back(w);
  }
  void weight() {
    out_.push_back(queued_.front());
    queued_.pop_front();
  }

  int p_, r_, n_;
  int f_[2] = {0, 0}, b_[2] = {0, 0};
  std::deque<action> queued_;
  std::vector<action> out_;
};

}  // namespace

std::vector<action> dual_pipe_v_compute(const schedule_shape& s) {
  const int p = s.pipeline_model_parallel_size;
  return for_shape(s, dual_pipe_v_order(p, s.pipeline_rank, std::max(s.num_microbatches, 2 * p)).build());
}

generator<action> dual_pipe_v(schedule_shape s) {
  auto compute = dual_pipe_v_compute(s);
  return with_v_transfers(std::move(s), std::move(compute));
}

}  // namespace mactor::schedules
