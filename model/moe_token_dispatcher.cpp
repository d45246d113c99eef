// Local MoE token permutation over the row kernels.
#include "model/moe_token_dispatcher.hpp"

#include <algorithm>

#include "kernels/moe_permute.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"

namespace mactor::model {

void moe_token_dispatcher::plan(const std::vector<int>& top, const std::vector<char>& kept, int rows,
                                int pad_multiple) {
  tokens_per_expert_.assign(experts_, 0);
  token_.clear(), choice_.clear();
  token_.reserve(std::size_t(rows) * topk_), choice_.reserve(std::size_t(rows) * topk_);
  // Each expert's column of the routing map: token t's choice of it, or -1.
  std::vector<std::int64_t> column(static_cast<std::size_t>(rows));
  for (int e = 0; e < experts_; ++e) {
    std::fill(column.begin(), column.end(), -1);
    std::int64_t routed = 0;
    for (int t = 0; t < rows; ++t)
      for (int j = 0; j < topk_; ++j)
        if (top[std::size_t(t) * topk_ + j] == e && kept[std::size_t(t) * topk_ + j])
          column[std::size_t(t)] = std::int64_t(t) * topk_ + j, ++routed;
    // pad_routing_map: the first (-routed mod pad_multiple) tokens not routed to e join it.
    std::int64_t pad = pad_multiple > 0 ? (pad_multiple - routed % pad_multiple) % pad_multiple : 0;
    for (int t = 0; t < rows; ++t) {
      const bool padding = column[std::size_t(t)] < 0 && pad > 0;
      if (column[std::size_t(t)] < 0 && !padding) continue;
      pad -= padding;
      token_.push_back(t), choice_.push_back(column[std::size_t(t)]);
      ++tokens_per_expert_[e];
    }
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
