// Group enumeration by mixed-radix coordinates: a group is every rank that agrees with this
// one on the dimensions that do not vary, listed with the fastest dimension first.
#include "comm/process_groups.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace mactor::comm {
namespace {

// Lists the ranks that share `coords` outside `vary_mask`, in rank order (dimension 0 fastest).
std::vector<int> enumerate(const std::array<int, 4>& dims, const std::array<int, 4>& coords,
                           unsigned vary_mask) {
  std::vector<int> out;
  const int total = dims[0] * dims[1] * dims[2] * dims[3];
  for (int r = 0; r < total; ++r) {
    int rest = r;
    bool member = true;
    for (int d = 0; d < 4; ++d) {
      const int c = rest % dims[d];
      rest /= dims[d];
      if (!(vary_mask & (1u << d)) && c != coords[d]) member = false;
    }
    if (member) out.push_back(r);
  }
  return out;
}

// `rank`'s mixed-radix digits over `dims`, dimension 0 fastest.
std::array<int, 4> digits(int rank, const std::array<int, 4>& dims) {
  std::array<int, 4> c{};
  for (int d = 0; d < 4; ++d) {
    c[d] = rank % dims[d];
    rank /= dims[d];
  }
  return c;
}

}  // namespace

process_groups::process_groups(int world_size, int rank, parallel_sizes sizes)
    : world_(world_size), rank_(rank), sizes_(sizes) {
  if (sizes_.etp == 0) sizes_.etp = sizes_.tp;
  if (sizes_.tp < 1 || sizes_.pp < 1 || sizes_.cp < 1 || sizes_.ep < 1 || sizes_.etp < 1 ||
      world_size < 1)
    throw std::invalid_argument("parallel sizes must be >= 1 (tp=" + std::to_string(sizes_.tp) +
                                " pp=" + std::to_string(sizes_.pp) +
                                " cp=" + std::to_string(sizes_.cp) +
                                " ep=" + std::to_string(sizes_.ep) + ")");
  const int model = sizes_.tp * sizes_.pp * sizes_.cp;
  if (world_size % model != 0)
    throw std::invalid_argument(
        "world size " + std::to_string(world_size) + " is not divisible by tp*pp*cp = " +
        std::to_string(model) + "; start a multiple of " + std::to_string(model) + " ranks");
  const int expert_model = sizes_.etp * sizes_.ep * sizes_.pp;
  if (world_size % expert_model != 0)
    throw std::invalid_argument("world size " + std::to_string(world_size) +
                                " is not divisible by etp*ep*pp = " +
                                std::to_string(expert_model) +
                                "; change --expert-model-parallel-size or the rank count");
  if (rank < 0 || rank >= world_size)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside the world of " +
                                std::to_string(world_size));
  dp_ = world_size / model;
  expert_dp_ = world_size / expert_model;
}

// With tp_pp_dp_mapping the last two named dimensions (dp, pp) swap places among the digits.
std::array<int, 4> process_groups::radices(const std::array<int, 4>& named) const {
  if (!sizes_.tp_pp_dp_mapping) return named;
  return {named[0], named[1], named[3], named[2]};
}

std::array<int, 4> process_groups::named_digits(int rank, const std::array<int, 4>& named) const {
  const auto d = digits(rank, radices(named));
  return sizes_.tp_pp_dp_mapping ? std::array<int, 4>{d[0], d[1], d[3], d[2]} : d;
}

unsigned process_groups::physical_mask(unsigned named_mask) const {
  if (!sizes_.tp_pp_dp_mapping) return named_mask;
  return (named_mask & 0b0011) | ((named_mask & 0b0100) << 1) | ((named_mask & 0b1000) >> 1);
}

rank_coords process_groups::coords_of(int rank) const {
  const auto c = named_digits(rank, {sizes_.tp, sizes_.cp, dp_, sizes_.pp});
  return {c[0], c[1], c[2], c[3]};
}

int process_groups::rank_of(rank_coords c) const {
  if (sizes_.tp_pp_dp_mapping) return c.tp + sizes_.tp * (c.cp + sizes_.cp * (c.pp + sizes_.pp * c.dp));
  return c.tp + sizes_.tp * (c.cp + sizes_.cp * (c.dp + dp_ * c.pp));
}

group process_groups::dense_group(kind k, unsigned vary_mask) const {
  const auto dims = radices({sizes_.tp, sizes_.cp, dp_, sizes_.pp});
  group g{enumerate(dims, digits(rank_, dims), physical_mask(vary_mask)), 0};
  // Groups of one kind are disjoint, so (kind, first member) identifies a group.
  g.id = (static_cast<std::uint32_t>(k) << 12) | (static_cast<std::uint32_t>(g.ranks[0]) & 0xFFF);
  return g;
}

group process_groups::expert_group(kind k, unsigned vary_mask) const {
  const auto dims = radices({sizes_.etp, sizes_.ep, expert_dp_, sizes_.pp});
  group g{enumerate(dims, digits(rank_, dims), physical_mask(vary_mask)), 0};
  g.id = (static_cast<std::uint32_t>(k) << 12) | (static_cast<std::uint32_t>(g.ranks[0]) & 0xFFF);
  return g;
}

group process_groups::tp_group() const { return dense_group(kind::tp, 0b0001); }
group process_groups::cp_group() const { return dense_group(kind::cp, 0b0010); }
group process_groups::dp_group() const { return dense_group(kind::dp, 0b0100); }
group process_groups::pp_group() const { return dense_group(kind::pp, 0b1000); }
group process_groups::dp_cp_group() const { return dense_group(kind::dp_cp, 0b0110); }
group process_groups::model_parallel_group() const { return dense_group(kind::mp, 0b1001); }
group process_groups::tp_cp_group() const { return dense_group(kind::tp_cp, 0b0011); }
group process_groups::tp_dp_cp_group() const { return dense_group(kind::tp_dp_cp, 0b0111); }
group process_groups::ep_group() const { return expert_group(kind::ep, 0b0010); }
group process_groups::expert_tp_group() const { return expert_group(kind::etp, 0b0001); }
group process_groups::expert_dp_group() const { return expert_group(kind::edp, 0b0100); }

std::vector<group> process_groups::hierarchical_cp_groups(const std::vector<int>& sizes) const {
  long long product = 1;
  for (int s : sizes) product *= s;
  if (product != sizes_.cp || sizes.empty() || sizes.size() > 16)
    throw std::invalid_argument("hierarchical context-parallel sizes multiply to " + std::to_string(product) +
                                ", not the context-parallel size " + std::to_string(sizes_.cp));
  const auto cp = cp_group().ranks;
  const int at = static_cast<int>(std::find(cp.begin(), cp.end(), rank_) - cp.begin());
  std::vector<group> levels;
  int below = 1;  // the product of the lower levels' sizes: this level's digit's weight
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    const int digit = (at / below) % sizes[l];
    group g;
    for (int d = 0; d < sizes[l]; ++d) g.ranks.push_back(cp[std::size_t(at + (d - digit) * below)]);
    g.id = ((static_cast<std::uint32_t>(kind::hcp_level0) + static_cast<std::uint32_t>(l)) << 12) |
           (static_cast<std::uint32_t>(g.ranks[0]) & 0xFFF);
    levels.push_back(std::move(g));
    below *= sizes[l];
  }
  return levels;
}

int process_groups::pipeline_next() const {
  rank_coords c = coords();
  c.pp = (c.pp + 1) % sizes_.pp;
  return rank_of(c);
}

int process_groups::pipeline_prev() const {
  rank_coords c = coords();
  c.pp = (c.pp + sizes_.pp - 1) % sizes_.pp;
  return rank_of(c);
}

}  // namespace mactor::comm
