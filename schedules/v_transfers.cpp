// Transfers for the V placement's compute orders.
#include "schedules/v_transfers.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

namespace mactor::schedules {
namespace {

bool first_stage(const schedule_shape& s, int chunk) { return virtual_stage(s, chunk) == 0; }
bool last_stage(const schedule_shape& s, int chunk) {
  return virtual_stage(s, chunk) == 2 * s.pipeline_model_parallel_size - 1;
}

// The receive a compute needs before it runs, if any.
std::optional<action> receive_for(const schedule_shape& s, const action& a) {
  if (a.kind == op::forward && !first_stage(s, a.chunk)) return action{op::recv_forward, a.microbatch, a.chunk};
  if (a.kind == op::backward && !last_stage(s, a.chunk)) return action{op::recv_backward, a.microbatch, a.chunk};
  return std::nullopt;
}

// The send a compute makes after it runs, if any.
std::optional<action> send_after(const schedule_shape& s, const action& a) {
  if (a.kind == op::forward && !last_stage(s, a.chunk)) return action{op::send_forward, a.microbatch, a.chunk};
  if (a.kind == op::backward && !first_stage(s, a.chunk)) return action{op::send_backward, a.microbatch, a.chunk};
  return std::nullopt;
}

}  // namespace

std::vector<action> for_shape(const schedule_shape& s, const std::vector<action>& laid_out) {
  std::vector<action> out;
  for (const action& a : laid_out)
    if (a.microbatch < s.num_microbatches && (!s.forward_only || a.kind == op::forward)) out.push_back(a);
  return out;
}

generator<action> with_v_transfers(schedule_shape s, std::vector<action> compute) {
  constexpr std::size_t lookahead = 2;
  std::set<std::tuple<op, int, int>> posted;
  for (std::size_t i = 0; i < compute.size(); ++i) {
    for (std::size_t j = i; j < std::min(compute.size(), i + lookahead + 1); ++j) {
      const auto recv = receive_for(s, compute[j]);
      if (recv && posted.insert({recv->kind, recv->microbatch, recv->chunk}).second) co_yield *recv;
    }
    co_yield compute[i];
    if (const auto send = send_after(s, compute[i])) co_yield *send;
  }
}

}  // namespace mactor::schedules
