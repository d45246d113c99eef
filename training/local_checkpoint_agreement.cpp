// The ranks agree on the local checkpoint to resume from: each all-gathers the (newest few)
// iterations it holds complete, and every rank computes the same newest common one.
#include "training/local_checkpoint_agreement.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "checkpoint/local_checkpoint.hpp"

namespace mactor::training {
namespace {

// Each rank sends this many of its newest complete iterations (-1 for none): a rank keeps
// checkpoint::local_checkpoints_kept, more only when a directory was filled by hand.
constexpr std::size_t sent_per_rank = 16;

}  // namespace

std::optional<local_checkpoint_choice> agreed_local_checkpoint(const config::megatron_args& args, parallel_context& ctx) {
  const auto& ck = args.checkpointing;
  if (ck.non_persistent_ckpt_type != std::optional<std::string>("local") || !ck.non_persistent_local_ckpt_dir)
    return std::nullopt;
  const auto own = checkpoint::local_rank_dir(*ck.non_persistent_local_ckpt_dir, ctx.rank());
  const auto held = checkpoint::complete_iterations(own);
  std::vector<std::int64_t> mine(sent_per_rank, -1);
  const std::size_t n = std::min(held.size(), sent_per_rank);
  std::copy(held.end() - static_cast<std::ptrdiff_t>(n), held.end(), mine.begin());
  const int world = ctx.world_size();
  std::vector<std::int64_t> all(sent_per_rank * static_cast<std::size_t>(world), -1);
  if (world > 1 && ctx.world())
    ctx.world()->all_gather_bytes(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
  else
    std::copy(mine.begin(), mine.end(), all.begin());
  std::vector<std::vector<std::int64_t>> per_rank(static_cast<std::size_t>(world));
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    for (std::size_t i = 0; i < sent_per_rank; ++i)
      if (const auto it = all[r * sent_per_rank + i]; it >= 0) per_rank[r].push_back(it);
  const auto common = checkpoint::newest_common_iteration(per_rank);
  if (!common) return std::nullopt;
  return local_checkpoint_choice{own, *common};
}

}  // namespace mactor::training
