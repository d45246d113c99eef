// Waiting for the slowest rank. Ranks that run the same work do not finish it at the same time:
// on a shared machine (other tenants, the OS, memory traffic) and at scale (stragglers, clocks,
// thermal limits) a rank's compute time varies around its mean. A collective (or a ring step)
// starts when its last member arrives, so each synchronization costs the group the expected
// lead of its slowest member. With compute times between two synchronizations independent and
// normal, of standard deviation jitter x their mean (the system file's compute_jitter, a
// coefficient of variation), that is E[max of n standard normals] x jitter x the compute since
// the last synchronization. Summed over a step's synchronizations, the cost is that factor times
// the compute they separate, whatever their number (jitter proportional to the work, as measured
// on this project's CPU machine: about the same share over a 4 ms layer and a 1.2 s iteration).
#pragma once

#include "simulate/cost_model.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// E[max of n independent standard normal variables]: 0 for n = 1, 0.564 for 2, 1.029 for 4,
/// 1.424 for 8, about sqrt(2 ln n) for large n (numerically integrated, cached).
double expected_max_of_normals(int n);

/// The expected wait of a group of `ranks` for its slowest member after `compute_s` seconds of
/// compute since their last synchronization: 0 without compute_jitter in the system file.
double slowest_rank_wait_seconds(const system_spec& system, int ranks, double compute_s);

/// The expected wait of a group of `ranks` at `synchronizations` collectives (or ring steps)
/// for the lateness of its slowest member that does not scale with the compute between them:
/// E[max of n standard normals] x the system file's sync_jitter x synchronizations (0 without
/// it). On a 2-core CPU machine a tensor-parallel collective waits ~150 us beyond its
/// alpha-beta cost on average whatever the compute before it, which compute_jitter, measured
/// over whole iterations, does not price.
double synchronization_wait_seconds(const system_spec& system, int ranks, double synchronizations);

/// The data-parallel replicas meet at the gradient sync after a step's compute of their own (a
/// layer's groups keep the ranks of one replica in step, not the replicas): the wait for the
/// slowest of `replicas` after `microbatches` forwards and backwards of chunk c (less their
/// exposed communication), which joins the chunk's sync.
double replica_wait_seconds(const system_spec& system, int replicas, int microbatches, const chunk_cost& c);

}  // namespace mactor::simulate
