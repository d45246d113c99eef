// --dist-ckpt-strictness: finding the keys and acting on them.
#include "training/checkpoint_strictness.hpp"

#include <cstdio>
#include <span>

#include "checkpoint/checkpoint_error.hpp"
#include "comm/communicator.hpp"

namespace mactor::training {
namespace {

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

bool strictness_checks_missing(const std::string& mode) {
  return mode == "log_all" || mode == "raise_all" || mode == "return_all";
}

std::vector<std::string> unrequested_keys(const std::vector<std::string>& checkpoint_names,
                                          const std::vector<std::string>& requested,
                                          comm::communicator* world) {
  std::vector<std::string> model_names;
  for (const auto& n : checkpoint_names)
    if (!starts_with(n, "optimizer.")) model_names.push_back(n);
  std::vector<float> asked(model_names.size(), 0.0f);
  for (std::size_t i = 0; i < model_names.size(); ++i)
    for (const auto& r : requested)
      if (r == model_names[i]) asked[i] = 1.0f;
  if (world && !asked.empty()) world->all_reduce(std::span<float>(asked));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < model_names.size(); ++i)
    if (asked[i] == 0.0f) out.push_back(model_names[i]);
  return out;
}

void apply_strictness(const std::string& mode, const checkpoint_keys& keys, const std::string& where, int rank,
                      const std::string& chosen_by) {
  const std::string why = chosen_by.empty() ? "--dist-ckpt-strictness " + mode : chosen_by;
  const auto& u = keys.unexpected;
  const auto& m = keys.missing;
  const std::string lacks = where + " lacks " + std::to_string(u.size()) + " tensor(s) this model has: " + listed(u);
  const std::string extra = where + " holds " + std::to_string(m.size()) + " model tensor(s) no rank uses: " + listed(m);
  if (mode == "ignore_all") return;
  if (mode == "assume_ok_unexpected") {
    if (!u.empty())
      throw checkpoint::checkpoint_error(lacks + "; was it saved by a different model (check --num-layers, --swiglu, "
                                         "--untie-embeddings-and-output-weights)? --dist-ckpt-strictness "
                                         "log_unexpected loads the rest and keeps those initialized");
    return;
  }
  const bool raise = mode == "raise_unexpected" || mode == "raise_all";
  if (raise && (!u.empty() || !m.empty()))
    throw checkpoint::checkpoint_error((u.empty() ? extra : m.empty() ? lacks : lacks + "; it also " + extra.substr(where.size() + 1)) +
                                       " (" + why + ")");
  if (raise) return;
  // log_unexpected, log_all, return_unexpected, return_all
  if (!u.empty())
    std::fprintf(stderr, "rank %d: WARNING: %s; they keep their initial values (%s)\n", rank, lacks.c_str(),
                 why.c_str());
  if (!m.empty() && rank == 0)
    std::fprintf(stderr, "WARNING: %s; they are not loaded (%s)\n", extra.c_str(), why.c_str());
}

}  // namespace mactor::training
