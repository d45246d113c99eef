// The two pieces of the router that are not top-k routing: Megatron's Sinkhorn balancing of a
// micro-batch's logits (--moe-router-load-balancing-type sinkhorn) and the multiplicative input
// jitter (--moe-input-jitter-eps), and the random logits of --moe-router-force-load-balancing.
#pragma once
#include <cstdint>
#include <vector>

namespace mactor::model {

/// Sinkhorn-Knopp scaling of exp(logits) [rows, experts] in fp32 (as Megatron's moe_utils.sinkhorn:
/// alternate row and column normalizations until the column factors move by at most tol on
/// average); returns d1[e] * exp(logits[t, e]) * d0[t], whose top k per row are the choices.
std::vector<float> sinkhorn_balanced(const std::vector<double>& logits, int rows, int experts, float tol = 1e-4f);

/// The jitter factor of element `index` of one forward's router input: uniform in
/// [1 - eps, 1 + eps) from the counter stream `stream` (the same draw on a recomputed forward).
double input_jitter(std::uint64_t stream, std::uint64_t index, double eps);

/// A standard normal draw for element `index` of counter stream `stream` (Box-Muller over two
/// of the stream's uniforms): --moe-router-force-load-balancing's random logits.
double random_logit(std::uint64_t stream, std::uint64_t index);

}  // namespace mactor::model
