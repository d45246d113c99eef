// SGD's element loop, one grid-stride pass (kernels/cuda/sgd.hpp).
#include "kernels/cuda/sgd.hpp"

#include "kernels/cuda/grid_stride.cuh"

namespace mactor::kernels::cuda {

namespace {

// The CPU loop's arithmetic: fmaf where it calls std::fma, the one product unfused (__fmul_rn:
// nvcc would otherwise contract it into the fma around it).
__global__ void sgd_kernel(float* value, const float* grad, float* buf, long long n, sgd_scalars s) {
  for (long long i = detail::first_element(); i < n; i += detail::grid_stride()) {
    float d_p = s.use_weight_decay ? fmaf(s.weight_decay, value[i], grad[i]) : grad[i];
    if (s.use_momentum) {
      buf[i] = s.first_step ? d_p : fmaf(s.keep, d_p, __fmul_rn(buf[i], s.momentum));
      d_p = s.nesterov ? fmaf(s.momentum, buf[i], d_p) : buf[i];
    }
    value[i] = fmaf(s.neg_lr, d_p, value[i]);
  }
}

}  // namespace

void sgd_step(float* value, const float* grad, float* buf, std::int64_t n, const sgd_hyperparameters& h,
              stream_handle s) {
  if (n == 0) return;
  sgd_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(value, grad, buf, n, sgd_scalars_for(h));
  detail::check_launch("sgd_step");
}

}  // namespace mactor::kernels::cuda
