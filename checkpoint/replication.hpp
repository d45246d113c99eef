// Replicated local checkpoints (--replication with --non-persistent-ckpt-type local): the ranks
// fall into cliques (NVIDIA Resiliency Extension's CliqueReplicationStrategy), each rank holds a
// copy of every clique peer's newest local checkpoints beside its own, and a rank that lost its
// own (a replaced host, a wiped local disk) resumes from a peer's copy. This file holds what needs
// no network: the cliques, where replicas live, a committed iteration packed into one byte string
// and back, and the plan of which peer sends which rank its state at a resume.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mactor::checkpoint {

/// The clique of `rank`: ranks n, n + J, ..., n + (F - 1)J with n = aJF + b (b < J), in that
/// order. The world must divide into groups of J * F ranks (config validation says so first).
std::vector<int> replication_clique(int rank, int jump, int factor, int world_size);

/// Where `holder` keeps its copies of `owner`'s local checkpoints: <dir>/rank_<holder>/replicas/rank_<owner>.
std::string replica_dir(const std::string& local_dir, int holder, int owner);

/// The committed iteration directory `iteration_dir` (every file under it, with its path
/// relative to it) as one byte string.
std::string pack_iteration(const std::filesystem::path& iteration_dir);
/// The same into `out` (replaced; its memory reused).
void pack_iteration(const std::filesystem::path& iteration_dir, std::string& out);

/// Writes what pack_iteration made as <root>/iter_NNNNNNN: into a temporary sibling first, each
/// file fsynced, then renamed into place (an older copy of that iteration is replaced), and the
/// tracker written. Throws checkpoint_error naming `root` when the bytes are not a packed
/// iteration or cannot be written.
void unpack_iteration(std::string_view packed, const std::filesystem::path& root, std::int64_t iteration);

/// What every rank holds: for rank r, `held[r][k]` are the iterations it holds complete of its
/// clique's k-th member (its own directory when that member is r itself).
using replica_holdings = std::vector<std::vector<std::vector<std::int64_t>>>;

/// One copy a resume moves: `holder` sends its replica of `owner`'s iteration to `owner`.
struct replica_transfer {
  int holder = 0, owner = 0;
};

/// The resume: the newest iteration every rank can have (its own copy or a clique peer's), and
/// the copies to move for the ranks that lack their own (from the first peer, in clique order,
/// that has it). nullopt iteration: no iteration is held for every rank.
struct replica_resume_plan {
  std::optional<std::int64_t> iteration;
  std::vector<replica_transfer> transfers;  ///< ordered by owner
};
replica_resume_plan plan_replica_resume(const replica_holdings& held, int jump, int factor);

}  // namespace mactor::checkpoint
