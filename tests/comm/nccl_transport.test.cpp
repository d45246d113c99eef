// NCCL behind the communicator interface. Without a GPU it skips with a message; with one GPU
// it runs a one-member group (NCCL refuses two ranks on one device) to check the wiring.
#include "comm/nccl_transport.hpp"

#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include "comm/collectives.hpp"
#include "comm/local_transport.hpp"

using namespace mactor::comm;

TEST_CASE("the NCCL communicator reduces, gathers and broadcasts device buffers") {
  if (cuda_device_count() == 0) {
    WARN("skipped: no CUDA device (cudaGetDeviceCount reported none or an error)");
    return;
  }
  local_fabric fabric(1);
  auto t = fabric.connect(0);
  transport_communicator bootstrap(*t, {0}, 1);
  nccl_communicator nccl(bootstrap, 0);
  REQUIRE(nccl.size() == 1);
  const std::vector<float> host{1.5f, -2.0f, 3.25f, 7.0f, 0.5f, 9.0f, -1.0f};
  const std::size_t n = host.size();
  float* a = nullptr;
  float* b = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&a), n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&b), n * sizeof(float)) == cudaSuccess);
  cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  std::vector<float> back(n);

  nccl.all_reduce(std::span<float>(a, n));
  cudaMemcpy(back.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost);
  CHECK(back == host);  // one member: the sum is the input

  nccl.all_gather(std::span<const float>(a, n), std::span<float>(b, n));
  cudaMemcpy(back.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost);
  CHECK(back == host);

  nccl.reduce_scatter(std::span<const float>(a, n), std::span<float>(b, n));
  nccl.broadcast(std::span<float>(b, n), 0);
  nccl.all_to_all(std::span<const float>(b, n), std::span<float>(a, n));
  nccl.barrier();
  cudaMemcpy(back.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost);
  CHECK(back == host);
  cudaFree(a);
  cudaFree(b);
}
