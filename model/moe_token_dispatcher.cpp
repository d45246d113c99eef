// Local MoE token permutation over the row kernels.
#include "model/moe_token_dispatcher.hpp"

#include "kernels/moe_permute.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"

namespace mactor::model {

void moe_token_dispatcher::plan(const std::vector<int>& top, const std::vector<char>& kept, int rows) {
  tokens_per_expert_.assign(experts_, 0);
  token_.clear(), choice_.clear();
  token_.reserve(std::size_t(rows) * topk_), choice_.reserve(std::size_t(rows) * topk_);
  for (int e = 0; e < experts_; ++e)
    for (int t = 0; t < rows; ++t)
      for (int j = 0; j < topk_; ++j)
        if (top[std::size_t(t) * topk_ + j] == e && kept[std::size_t(t) * topk_ + j]) {
          token_.push_back(t), choice_.push_back(std::int64_t(t) * topk_ + j);
          ++tokens_per_expert_[e];
        }
}

void moe_token_dispatcher::dispatch(tensor::const_tensor_view x, tensor::tensor_view out,
                                    int hidden) const {
  kernels::gather_rows(out, x, token_, hidden);
}

void moe_token_dispatcher::dispatch_backward(tensor::const_tensor_view dout, tensor::tensor_view dx,
                                             int rows, int hidden) const {
  auto whole = elements(dx, 0, std::int64_t(rows) * hidden);
  kernels::fill_zero(whole);
  kernels::scatter_add_rows(whole, dout, token_, hidden);
}

void moe_token_dispatcher::combine(tensor::const_tensor_view expert_out, tensor::tensor_view out,
                                   int rows, int hidden) const {
  auto whole = elements(out, 0, std::int64_t(rows) * hidden);
  kernels::fill_zero(whole);
  kernels::scatter_add_rows(whole, expert_out, token_, hidden);
}

}  // namespace mactor::model
