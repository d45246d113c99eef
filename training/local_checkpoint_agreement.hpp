// Which local non-persistent checkpoint a job resumes from (--non-persistent-ckpt-type local):
// the ranks exchange the iterations each holds complete and all take the newest they share. With
// --replication a rank's clique peers' copies count too, and a rank without its own copy of the
// chosen iteration receives it from the first peer that has one.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/megatron_args.hpp"
#include "training/parallel_context.hpp"

namespace mactor::training {

/// A local checkpoint every rank holds: where this rank's copy lives and its iteration.
struct local_checkpoint_choice {
  std::string directory;  ///< <--non-persistent-local-ckpt-dir>/rank_N
  std::int64_t iteration = 0;
};

/// Collective over the world (every rank calls it with the same args): the newest iteration
/// complete in every rank's own directory (or, with --replication, in a clique peer's replicas,
/// then copied into the rank's own directory before this returns); nullopt without
/// --non-persistent-ckpt-type local or when the ranks share none.
std::optional<local_checkpoint_choice> agreed_local_checkpoint(const config::megatron_args& args, parallel_context& ctx);

}  // namespace mactor::training
