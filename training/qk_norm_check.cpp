// The --test-mode comparison of the --qk-layernorm weights across ranks.
#include "training/qk_norm_check.hpp"

#include <stdexcept>
#include <string>

#include "training/weight_hash_check.hpp"

namespace mactor::training {

void check_qk_norms_across_ranks(std::vector<model::gpt_chunk>& chunks, model::group& tp,
                                 comm::communicator* dp, int rank) {
  std::vector<std::uint64_t> hashes;
  std::vector<std::string> names;
  for (auto& c : chunks)
    for (const auto& p : c.parameters())
      if (p.name.find(".q_layernorm.") != std::string::npos || p.name.find(".k_layernorm.") != std::string::npos) {
        hashes.push_back(fnv1a_hash(p.value));
        names.push_back(p.name);
      }
  if (hashes.empty()) return;
  auto fail_on = [&](const std::vector<std::size_t>& differing, const char* group, int size) {
    if (differing.empty()) return;
    std::string list;
    for (auto i : differing) list += (list.empty() ? "" : ", ") + names[i];
    throw std::runtime_error("--test-mode: the query/key norm weights differ across the " + std::to_string(size) + " " +
                             group + " ranks of rank " + std::to_string(rank) + ": " + list);
  };
  if (tp.size() > 1)
    fail_on(differing_hashes(hashes, tp.size(), [&tp](std::span<double> v) { tp.all_reduce_sum(v.data(), v.size()); }),
            "tensor-parallel", tp.size());
  if (dp)
    fail_on(differing_hashes(hashes, dp->size(), [dp](std::span<double> v) { dp->all_reduce(v); }), "data-parallel",
            dp->size());
}

}  // namespace mactor::training
