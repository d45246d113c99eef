// Adam / AdamW: the moments' storage and the step count here, the update itself in
// kernels::adam_step (the scalars in double as Python makes them, then each tensor operation in
// fp32 in torch's order), on the parameters' device.
#include "model/optimizer_adam.hpp"

#include <stdexcept>
#include <utility>

#include "kernels/adam.hpp"
#include "kernels/convert.hpp"

namespace mactor::model {

namespace {

// A moment not kept in fp32, as an fp32 view the update can take: on a device, widened into
// `device` scratch there; on the host, unscaled into `host`.
tensor::tensor_view widened(scaled_state& s, std::vector<float>& host, tensor::tensor& device) {
  if (const auto stored = s.device_view(); stored.data) {
    device = tensor::tensor(stored.shape, tensor::dtype::float32, tensor::memory_kind::optimizer_state, stored.where);
    s.widen_into(device.view());
    return device.view();
  }
  host.resize(s.size());
  s.unscale(host);
  return tensor::view_of(std::span<float>(host));
}

// The updated fp32 copy back into the moment's storage (rescaled and rounded).
void round_back(scaled_state& s, const std::vector<float>& host, tensor::tensor& device) {
  if (device.defined()) s.round_from(device.view());
  else s.set(host);
}

}  // namespace

adam_optimizer::adam_optimizer(std::vector<optim_param> params, std::vector<param_group> groups,
                               adam_options options)
    : optimizer(std::move(params), std::move(groups)), options_(options),
      state_(params_.size(), adam_param_state{0, scaled_state(options.exp_avg_dtype),
                                              scaled_state(options.exp_avg_sq_dtype)}) {
  if (!(options_.beta1 >= 0.0 && options_.beta1 < 1.0) ||
      !(options_.beta2 >= 0.0 && options_.beta2 < 1.0))
    throw std::invalid_argument("--adam-beta1 and --adam-beta2 must lie in [0, 1); got " +
                                std::to_string(options_.beta1) + " and " +
                                std::to_string(options_.beta2));
  if (!(options_.eps >= 0.0))
    throw std::invalid_argument("--adam-eps must be >= 0; got " + std::to_string(options_.eps));
}

void adam_optimizer::step() {
  for (const param_group& g : groups_)
    for (std::size_t i : g.params) update(params_[i], state_[i], g.lr, g.weight_decay);
}

void adam_optimizer::update(const optim_param& p, adam_param_state& s, double lr,
                            double weight_decay) {
  if (s.exp_avg.size() != p.numel) {
    s.exp_avg.zero(p.numel, p.where);
    s.exp_avg_sq.zero(p.numel, p.where);
  }
  s.step += 1;
  kernels::adam_hyperparameters h;
  h.lr = lr, h.weight_decay = weight_decay;
  h.beta1 = options_.beta1, h.beta2 = options_.beta2, h.eps = options_.eps;
  h.decoupled_weight_decay = options_.decoupled_weight_decay;
  h.step = s.step;
  // fp32 moments update in place (on the parameter's device); others as FusedAdam runs them:
  // unscaled into fp32 copies, updated, rescaled and rounded back (bf16 and fp16 moments on a
  // device in fp32 device scratch, by the device's kernels: the same bits as the host's).
  tensor::tensor device_m, device_v;
  auto m = s.exp_avg.fp32_view(), v = s.exp_avg_sq.fp32_view();
  if (!m.data) m = widened(s.exp_avg, wide_exp_avg_, device_m);
  if (!v.data) v = widened(s.exp_avg_sq, wide_exp_avg_sq_, device_v);
  kernels::adam_step(p.value_view(), p.grad_view(), m, v, h);
  if (!s.exp_avg.fp32_view().data) round_back(s.exp_avg, wide_exp_avg_, device_m);
  if (!s.exp_avg_sq.fp32_view().data) round_back(s.exp_avg_sq, wide_exp_avg_sq_, device_v);
}

}  // namespace mactor::model
