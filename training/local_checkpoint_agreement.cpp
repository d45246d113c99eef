// The ranks agree on the local checkpoint to resume from: each all-gathers the (newest few)
// iterations it holds complete, its own and (with --replication) its clique peers' replicas, and
// every rank computes the same newest iteration and the replicas to move.
#include "training/local_checkpoint_agreement.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "checkpoint/layout.hpp"
#include "checkpoint/local_checkpoint.hpp"
#include "checkpoint/replication.hpp"

namespace mactor::training {
namespace {

// Each rank sends this many of its newest complete iterations (-1 for none) per clique member: a
// rank keeps checkpoint::local_checkpoints_kept, more only when a directory was filled by hand.
constexpr std::size_t sent_per_member = 16;

struct replication_shape {
  int jump = 1, factor = 1;  // factor 1: no replicas, the rank's own directory alone
};

replication_shape shape_of(const config::megatron_args& args) {
  const auto& rep = args.distributed;
  if (!rep.replication || !rep.replication_jump) return {};
  return {static_cast<int>(*rep.replication_jump), static_cast<int>(rep.replication_factor)};
}

// The iterations this rank holds of each clique member, newest sent_per_member each, -1 padded.
std::vector<std::int64_t> own_holdings(const std::string& local_dir, int rank, const std::vector<int>& clique) {
  std::vector<std::int64_t> mine(sent_per_member * clique.size(), -1);
  for (std::size_t k = 0; k < clique.size(); ++k) {
    const auto dir = clique[k] == rank ? checkpoint::local_rank_dir(local_dir, rank)
                                       : checkpoint::replica_dir(local_dir, rank, clique[k]);
    const auto held = checkpoint::complete_iterations(dir);
    const std::size_t n = std::min(held.size(), sent_per_member);
    std::copy(held.end() - static_cast<std::ptrdiff_t>(n), held.end(),
              mine.begin() + static_cast<std::ptrdiff_t>(k * sent_per_member));
  }
  return mine;
}

// Moves the plan's replicas, every rank walking the transfers in the same order (each is one
// send and one receive between two ranks, so the walk cannot deadlock): a size, then the bytes.
void move_replicas(const checkpoint::replica_resume_plan& plan, const std::string& local_dir, parallel_context& ctx) {
  const int rank = ctx.rank();
  for (const auto& t : plan.transfers) {
    if (t.holder == rank) {
      const auto from = checkpoint::iteration_dir(checkpoint::replica_dir(local_dir, rank, t.owner), *plan.iteration);
      const std::string packed = checkpoint::pack_iteration(from);
      std::uint64_t size = packed.size();
      ctx.world()->send_bytes(std::as_bytes(std::span(&size, 1)), t.owner);
      ctx.world()->send_bytes(std::as_bytes(std::span(packed.data(), packed.size())), t.owner);
    } else if (t.owner == rank) {
      const auto start = std::chrono::steady_clock::now();
      std::uint64_t size = 0;
      ctx.world()->recv_bytes(std::as_writable_bytes(std::span(&size, 1)), t.holder);
      std::string packed(size, '\0');
      ctx.world()->recv_bytes(std::as_writable_bytes(std::span(packed.data(), packed.size())), t.holder);
      checkpoint::unpack_iteration(packed, checkpoint::local_rank_dir(local_dir, rank), *plan.iteration);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf(" rank %d: restored its local checkpoint of iteration %lld from rank %d's replica (%.1f MiB in %.3f s)\n",
                  rank, static_cast<long long>(*plan.iteration), t.holder, static_cast<double>(size) / (1024.0 * 1024.0),
                  seconds);
      std::fflush(stdout);
    }
  }
}

}  // namespace

std::optional<local_checkpoint_choice> agreed_local_checkpoint(const config::megatron_args& args, parallel_context& ctx) {
  const auto& ck = args.checkpointing;
  if (ck.non_persistent_ckpt_type != std::optional<std::string>("local") || !ck.non_persistent_local_ckpt_dir)
    return std::nullopt;
  const auto& local_dir = *ck.non_persistent_local_ckpt_dir;
  const int world = ctx.world_size(), rank = ctx.rank();
  const auto shape = shape_of(args);
  const auto clique = checkpoint::replication_clique(rank, shape.jump, shape.factor, world);
  const auto mine = own_holdings(local_dir, rank, clique);
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(world), -1);
  if (world > 1 && ctx.world())
    ctx.world()->all_gather_bytes(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
  else
    std::copy(mine.begin(), mine.end(), all.begin());
  checkpoint::replica_holdings held(static_cast<std::size_t>(world));
  for (std::size_t r = 0; r < held.size(); ++r) {
    held[r].resize(clique.size());
    for (std::size_t k = 0; k < clique.size(); ++k)
      for (std::size_t i = 0; i < sent_per_member; ++i)
        if (const auto it = all[(r * clique.size() + k) * sent_per_member + i]; it >= 0) held[r][k].push_back(it);
  }
  const auto plan = checkpoint::plan_replica_resume(held, shape.jump, shape.factor);
  if (!plan.iteration) return std::nullopt;
  move_replicas(plan, local_dir, ctx);
  return local_checkpoint_choice{checkpoint::local_rank_dir(local_dir, rank), *plan.iteration};
}

}  // namespace mactor::training
