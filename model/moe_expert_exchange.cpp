// Counts, row order and the two all-to-alls of the expert-parallel token exchange.
#include "model/moe_expert_exchange.hpp"

#include <stdexcept>
#include <string>

#include "kernels/moe_permute.hpp"
#include "model/activation.hpp"

namespace mactor::model {

moe_expert_exchange::moe_expert_exchange(int num_experts, group& ep)
    : ep_(ep), experts_(num_experts), local_(num_experts / ep.size()) {
  if (num_experts % ep.size() != 0)
    throw std::invalid_argument("moe_expert_exchange: " + std::to_string(num_experts) +
                                " experts do not split over " + std::to_string(ep.size()) + " expert-parallel ranks");
}

void moe_expert_exchange::plan(const std::vector<std::int64_t>& tokens_per_expert) {
  const int ranks = ep_.size(), me = ep_.rank();
  // counts[q * experts + e]: rank q's rows for global expert e (exact in double).
  std::vector<double> mine(tokens_per_expert.begin(), tokens_per_expert.end());
  std::vector<double> counts(std::size_t(ranks) * experts_);
  ep_.all_gather(mine.data(), counts.data(), mine.size());
  auto count = [&](int q, int e) { return std::int64_t(counts[std::size_t(q) * experts_ + e]); };
  send_rows_.assign(ranks, 0), recv_rows_.assign(ranks, 0), local_counts_.assign(local_, 0);
  for (int q = 0; q < ranks; ++q)
    for (int l = 0; l < local_; ++l) {
      send_rows_[q] += tokens_per_expert[std::size_t(q) * local_ + l];
      recv_rows_[q] += count(q, me * local_ + l);
      local_counts_[l] += count(q, me * local_ + l);
    }
  // Received from rank q: its rows for local expert 0, 1, ... in turn. Sorted: expert by
  // expert, each expert's rows by source rank.
  std::vector<std::int64_t> block_start(std::size_t(ranks) * local_);
  std::int64_t at = 0;
  for (int q = 0; q < ranks; ++q)
    for (int l = 0; l < local_; ++l) block_start[std::size_t(q) * local_ + l] = at, at += count(q, me * local_ + l);
  sort_.clear(), sort_.reserve(std::size_t(at));
  for (int l = 0; l < local_; ++l)
    for (int q = 0; q < ranks; ++q)
      for (std::int64_t i = 0; i < count(q, me * local_ + l); ++i) sort_.push_back(block_start[std::size_t(q) * local_ + l] + i);
  unsort_.assign(sort_.size(), 0);
  for (std::size_t i = 0; i < sort_.size(); ++i) unsort_[std::size_t(sort_[i])] = std::int64_t(i);
}

void moe_expert_exchange::to_experts(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width) {
  auto received = ensure_activation(buffer_, received_rows(), width, in.type);
  ep_.all_to_all_v(in, send_rows_, received, recv_rows_, width);
  kernels::gather_rows(out, received, sort_, int(width));
}

void moe_expert_exchange::from_experts(tensor::const_tensor_view in, tensor::tensor_view out, std::int64_t width) {
  auto unsorted = ensure_activation(buffer_, received_rows(), width, in.type);
  kernels::gather_rows(unsorted, in, unsort_, int(width));
  ep_.all_to_all_v(unsorted, recv_rows_, out, send_rows_, width);
}

}  // namespace mactor::model
