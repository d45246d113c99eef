// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 6): two model chunks per
// rank placed in a V, the backward split into an input-gradient pass B and a weight-gradient pass
// W, and an order that leaves (nearly) no bubble at 1F1B's activation memory.
#pragma once

#include <vector>

#include "schedules/action.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule_shape.hpp"

namespace mactor::schedules {

/// The compute order of rank r (pp = p, m micro-batches; chunk 0 runs virtual stage r, chunk 1
/// stage 2p - 1 - r, so rank 0 holds the embedding and the loss and rank p - 1 turns the V):
///   warmup   2(p - r) - 1 forwards of chunk 0; r pairs (F chunk 1, F chunk 0); p - r triples
///            (F, B, W of chunk 1);
///   steady   F chunk 0 (while micro-batches are left), B W chunk 0, F B W chunk 1, until every
///            micro-batch has run forward on both chunks;
///   cooldown r pairs (B chunk 0, B chunk 1); p - r pairs (B, W of chunk 0); the W passes left,
///            chunk 1's first.
/// The order is laid out for max(m, 2p - 1) micro-batches and the actions of micro-batches >= m
/// dropped, so any m >= 1 runs. forward_only: the same order's forwards.
std::vector<action> zero_bubble_v_compute(const schedule_shape& s);

/// zero_bubble_v_compute with the transfers of with_v_transfers (schedules/v_transfers.hpp).
/// Bubble with passes of equal time: zero_bubble_v_bubble_fraction. Precondition: validate(s)
/// is empty.
generator<action> zero_bubble_v(schedule_shape s);

}  // namespace mactor::schedules
