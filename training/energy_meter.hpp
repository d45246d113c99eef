// --log-energy on the CPU: the kernel's RAPL package energy counters (powercap's intel-rapl:N),
// the CPU's stand-in for the GPU energy NVML gives Megatron's EnergyMonitor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mactor::training {

class energy_meter {
 public:
  /// Reads <root>/intel-rapl:N/energy_uj for every package N (not its subzones), by default
  /// /sys/class/powercap or $MACTOR_POWERCAP_ROOT.
  explicit energy_meter(std::string root = default_root());
  static std::string default_root();

  /// Whether any package counter could be read.
  bool available() const { return !domains_.empty(); }
  const std::string& root() const { return root_; }
  /// Joules since the previous call (or construction), over every package; a counter that
  /// wrapped around its max_energy_range_uj is unwrapped.
  double lap();

 private:
  struct domain {
    std::string energy_path;
    std::uint64_t range_uj = 0;  // 0: unknown (no unwrapping)
    std::uint64_t last_uj = 0;
  };
  std::string root_;
  std::vector<domain> domains_;
};

}  // namespace mactor::training
