// The required fields of a system file, the object left open so a test appends optional ones
// (", \"memory_efficiency\": 0.75}") or just closes it ("}").
#pragma once

#include <string>

namespace mactor::test {

inline const std::string minimal_system_json = R"({"peak_tflops_bf16": 1, "peak_tflops_fp32": 1, "compute_efficiency": 0.5,
    "memory_GiB": 1, "memory_bandwidth_GBps": 1, "accelerators_per_node": 1,
    "intra_node": {"bandwidth_GBps": 1, "latency_us": 1}, "inter_node": {"bandwidth_GBps": 1, "latency_us": 1},
    "collective_efficiency": 0.5)";

}  // namespace mactor::test
