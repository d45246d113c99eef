// Megatron's hybrid layer allocation. Counts round half to even, as Python's round() does.
#include "config/hybrid_layer_allocation.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mactor::config {

namespace {

int python_round(double v) { return int(std::nearbyint(v)); }  // ties to even by default

// Walks the layers, turning one in every `spacing` of the `from` kind into `to`: a running
// budget of `from` layers starts at spacing; a layer with under half a layer of budget left
// becomes `to` and refills it.
void spread(std::vector<hybrid_layer>& layers, hybrid_layer from, hybrid_layer to,
            double spacing) {
  double budget = spacing;
  for (auto& l : layers) {
    if (l != from) continue;
    if (budget < 0.5) {
      l = to;
      budget += spacing;
    } else {
      budget -= 1;
    }
  }
}

std::vector<hybrid_layer> allocate_by_ratio(int n, double attention_ratio, double mlp_ratio) {
  std::vector<hybrid_layer> layers(std::size_t(n), hybrid_layer::mamba);
  const int attention = python_round(n * attention_ratio);
  int mamba = n - attention;
  spread(layers, hybrid_layer::mamba, hybrid_layer::attention, double(mamba) / (attention + 1));
  const int mlp = python_round(n * mlp_ratio);
  if (mlp > 0) {
    mamba -= mlp;
    spread(layers, hybrid_layer::mamba, hybrid_layer::mlp, double(mamba) / mlp);
  }
  return layers;
}

std::vector<hybrid_layer> parse_pattern(const std::string& pattern, int n) {
  if (int(pattern.size()) != n)
    throw std::invalid_argument("--hybrid-override-pattern=" + pattern + " has " +
                                std::to_string(pattern.size()) + " layers but --num-layers is " +
                                std::to_string(n) + "; give one character per layer");
  std::vector<hybrid_layer> layers;
  for (char ch : pattern) {
    if (ch != 'M' && ch != '*' && ch != '-')
      throw std::invalid_argument("--hybrid-override-pattern=" + pattern + " holds '" +
                                  std::string(1, ch) +
                                  "'; use M (Mamba), * (attention) and - (MLP) only");
    layers.push_back(hybrid_layer(ch));
  }
  return layers;
}

void check_ratio(const char* flag, double v) {
  if (!(v >= 0.0 && v <= 1.0))
    throw std::invalid_argument(std::string(flag) + "=" + std::to_string(v) +
                                " is not a fraction of the layers; give a value in [0, 1]");
}

}  // namespace

std::vector<hybrid_layer> allocate_hybrid_layers(const hybrid_allocation_settings& s) {
  if (s.num_layers <= 0)
    throw std::invalid_argument("a hybrid model needs --num-layers of at least 1");
  check_ratio("--hybrid-attention-ratio", s.attention_ratio);
  check_ratio("--hybrid-mlp-ratio", s.mlp_ratio);
  if (s.attention_ratio + s.mlp_ratio > 1.0)
    throw std::invalid_argument("--hybrid-attention-ratio plus --hybrid-mlp-ratio is " +
                                std::to_string(s.attention_ratio + s.mlp_ratio) +
                                "; together they may cover at most all layers (1.0)");
  auto layers = allocate_by_ratio(s.num_layers, s.attention_ratio, s.mlp_ratio);
  if (!s.pattern) return layers;
  auto overridden = parse_pattern(*s.pattern, s.num_layers);
  const bool ratios_given = s.attention_ratio > 0.0 || s.mlp_ratio > 0.0;
  for (auto kind : {hybrid_layer::mamba, hybrid_layer::attention, hybrid_layer::mlp}) {
    if (ratios_given && std::count(layers.begin(), layers.end(), kind) !=
                            std::count(overridden.begin(), overridden.end(), kind))
      throw std::invalid_argument(
          "--hybrid-override-pattern=" + *s.pattern + " has other layer counts than the " +
          "ratios allocate (" + to_string(layers) + "); match them, or leave " +
          "--hybrid-attention-ratio and --hybrid-mlp-ratio at 0");
  }
  return overridden;
}

std::string to_string(const std::vector<hybrid_layer>& layers) {
  std::string s;
  for (auto l : layers) s += char(l);
  return s;
}

}  // namespace mactor::config
