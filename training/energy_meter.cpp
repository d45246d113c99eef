// RAPL package energy through powercap.
#include "training/energy_meter.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

namespace mactor::training {
namespace {

std::optional<std::uint64_t> read_number(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

std::string energy_meter::default_root() {
  const char* env = std::getenv("MACTOR_POWERCAP_ROOT");
  return env && *env ? env : "/sys/class/powercap";
}

energy_meter::energy_meter(std::string root) : root_(std::move(root)) {
  static const std::regex package(R"(intel-rapl:\d+)");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, package)) continue;
    domain d;
    d.energy_path = (entry.path() / "energy_uj").string();
    const auto now = read_number(d.energy_path);
    if (!now) continue;  // unreadable (energy_uj is root-only on many kernels)
    d.last_uj = *now;
    d.range_uj = read_number(entry.path() / "max_energy_range_uj").value_or(0);
    domains_.push_back(d);
  }
}

double energy_meter::lap() {
  double joules = 0;
  for (auto& d : domains_) {
    const auto now = read_number(d.energy_path);
    if (!now) continue;
    std::uint64_t delta = *now >= d.last_uj ? *now - d.last_uj : (d.range_uj ? d.range_uj - d.last_uj + *now : 0);
    d.last_uj = *now;
    joules += double(delta) * 1e-6;
  }
  return joules;
}

}  // namespace mactor::training
