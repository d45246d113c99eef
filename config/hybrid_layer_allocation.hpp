// Which kind each layer of a hybrid Mamba model is (--hybrid-attention-ratio,
// --hybrid-mlp-ratio, --hybrid-override-pattern), as Megatron-Core's allocate_layers decides:
// attention evenly spaced between Mamba sections, then MLPs spread right-justified over the
// remaining Mamba layers; a pattern replaces that when its counts agree with the ratios.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace mactor::config {

enum class hybrid_layer : char { mamba = 'M', attention = '*', mlp = '-' };

struct hybrid_allocation_settings {
  int num_layers = 0;
  double attention_ratio = 0.0;            ///< --hybrid-attention-ratio
  double mlp_ratio = 0.0;                  ///< --hybrid-mlp-ratio
  std::optional<std::string> pattern;      ///< --hybrid-override-pattern ("M-M-M*-")
};

/// One kind per layer. Throws std::invalid_argument naming the flag, the value and a fix: a ratio
/// outside [0, 1], ratios summing past 1, a pattern of the wrong length or with a character
/// other than M, * and -, or a pattern whose counts differ from the ratios' allocation.
std::vector<hybrid_layer> allocate_hybrid_layers(const hybrid_allocation_settings& settings);

/// The allocation as Megatron prints it ("MM*-MM*-").
std::string to_string(const std::vector<hybrid_layer>& layers);

}  // namespace mactor::config
