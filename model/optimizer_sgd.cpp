// SGD with momentum, in torch.optim.SGD's order (kernels/sgd.hpp holds the element loop), on the
// parameters' device: the momentum buffer lives beside them.
#include "model/optimizer_sgd.hpp"

#include <stdexcept>
#include <utility>

#include "kernels/sgd.hpp"

namespace mactor::model {

sgd_optimizer::sgd_optimizer(std::vector<optim_param> params, std::vector<param_group> groups,
                             sgd_options options)
    : optimizer(std::move(params), std::move(groups)), options_(options),
      state_(params_.size()) {
  if (!(options_.momentum >= 0.0))
    throw std::invalid_argument("--sgd-momentum must be >= 0; got " +
                                std::to_string(options_.momentum));
  if (options_.nesterov && (options_.momentum <= 0.0 || options_.dampening != 0.0))
    throw std::invalid_argument("Nesterov SGD needs --sgd-momentum > 0 and zero dampening");
}

void sgd_optimizer::step() {
  for (const param_group& g : groups_)
    for (std::size_t i : g.params) update(params_[i], state_[i], g.lr, g.weight_decay);
}

void sgd_optimizer::update(const optim_param& p, sgd_param_state& s, double lr,
                           double weight_decay) {
  kernels::sgd_hyperparameters h;
  h.lr = lr, h.weight_decay = weight_decay;
  h.momentum = options_.momentum, h.dampening = options_.dampening, h.nesterov = options_.nesterov;
  // torch creates the buffer on the first step as a copy of d_p; a checkpoint's buffer counts as
  // one that exists.
  h.first_step = h.momentum != 0.0 && s.momentum_buffer.size() != p.numel;
  if (h.first_step) s.momentum_buffer.zero(p.numel, p.where);
  kernels::sgd_step(p.value_view(), p.grad_view(), s.momentum_buffer.fp32_view(), h);
}

}  // namespace mactor::model
