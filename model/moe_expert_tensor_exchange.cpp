// Counts, row order and the two unequal-block collectives of the experts' tensor-parallel group.
#include "model/moe_expert_tensor_exchange.hpp"

#include "kernels/moe_permute.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"

namespace mactor::model {

moe_expert_tensor_exchange::moe_expert_tensor_exchange(group& etp, int local_experts)
    : etp_(etp), local_(local_experts) {}

void moe_expert_tensor_exchange::plan(const std::vector<std::int64_t>& tokens_per_expert) {
  const int ranks = etp_.size();
  // counts[q * local + l]: rank q's rows for local expert l (exact in double).
  std::vector<double> mine(tokens_per_expert.begin(), tokens_per_expert.end());
  std::vector<double> counts(std::size_t(ranks) * local_);
  etp_.all_gather(mine.data(), counts.data(), mine.size());
  auto count = [&](int q, int l) { return std::int64_t(counts[std::size_t(q) * local_ + l]); };
  rows_of_.assign(ranks, 0), gathered_counts_.assign(local_, 0);
  std::vector<std::int64_t> start(std::size_t(ranks) * local_);  // rank q's expert l in the received rows
  std::int64_t at = 0;
  for (int q = 0; q < ranks; ++q)
    for (int l = 0; l < local_; ++l) {
      start[std::size_t(q) * local_ + l] = at;
      at += count(q, l), rows_of_[q] += count(q, l), gathered_counts_[l] += count(q, l);
    }
  order_.clear(), order_.reserve(std::size_t(at));
  for (int l = 0; l < local_; ++l)
    for (int q = 0; q < ranks; ++q)
      for (std::int64_t i = 0; i < count(q, l); ++i) order_.push_back(start[std::size_t(q) * local_ + l] + i);
  unorder_.assign(order_.size(), 0);
  for (std::size_t i = 0; i < order_.size(); ++i) unorder_[std::size_t(order_[i])] = std::int64_t(i);
}

void moe_expert_tensor_exchange::gather(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width) {
  const int ranks = etp_.size();
  const std::int64_t mine = rows_of_[etp_.rank()];
  // Every rank receives this rank's rows: the send buffer holds them once per rank.
  auto sent = ensure_activation(sent_, ranks * mine, width, in.type);
  for (int q = 0; q < ranks; ++q) kernels::copy(elements(sent, q * mine * width, mine * width), elements(in, 0, mine * width));
  auto received = ensure_activation(received_, gathered_rows(), width, in.type);
  etp_.all_to_all_v(sent, std::vector<std::int64_t>(std::size_t(ranks), mine), received, rows_of_, width);
  kernels::gather_rows(out, received, order_, int(width));
}

void moe_expert_tensor_exchange::scatter_sum(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width) {
  const int ranks = etp_.size();
  const std::int64_t mine = rows_of_[etp_.rank()];
  auto blocked = ensure_activation(received_, gathered_rows(), width, in.type);
  kernels::gather_rows(blocked, in, unorder_, int(width));
  auto parts = ensure_activation(sent_, ranks * mine, width, in.type);
  etp_.all_to_all_v(blocked, rows_of_, parts, std::vector<std::int64_t>(std::size_t(ranks), mine), width);
  const std::int64_t n = mine * width;
  kernels::copy(elements(out, 0, n), elements(parts, 0, n));
  for (int q = 1; q < ranks; ++q) kernels::add(elements(out, 0, n), elements(parts, q * n, n));
}

}  // namespace mactor::model
