// The CUDA device layer: detection (runs everywhere), then on a device the caching allocator,
// host<->device copies of tensors, streams and events (skipped without one).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "tensor/cuda/copy.hpp"
#include "tensor/cuda/device.hpp"
#include "tensor/cuda/device_allocator.hpp"
#include "tensor/cuda/stream.hpp"
#include "tests/require_cuda_device.hpp"

namespace cuda = mactor::cuda;
namespace tensor = mactor::tensor;

TEST_CASE("cuda device count is zero exactly when a reason is given", "[cuda][detect]") {
  const int count = cuda::device_count();
  const std::string reason = cuda::no_device_reason();
  INFO("device_count " << count << ", reason '" << reason << "'");
  CHECK(count >= 0);
  CHECK((count == 0) == !reason.empty());
  if (count > 0) CHECK_FALSE(cuda::describe_device(0).empty());
}

TEST_CASE("cuda device memory on a missing device is an error naming it", "[cuda][detect]") {
  const int missing = cuda::device_count();  // one past the last device (0 without any)
  CHECK_THROWS_WITH(cuda::device_allocator(missing),
                    Catch::Contains("no CUDA device " + std::to_string(missing)));
  CHECK_THROWS_AS(cuda::device_buffer({4}, tensor::dtype::float32, missing), cuda::cuda_error);
}

TEST_CASE("cuda copies a tensor to the device and back", "[cuda][device]") {
  mactor::testing::require_cuda_device();
  std::vector<float> host(1001), back(1001, -1.f);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f - 7;
  cuda::stream s;
  cuda::device_buffer a({7, 143}, tensor::dtype::float32), b({1001}, tensor::dtype::float32);
  cuda::copy(a, tensor::view_of(std::span<const float>(host)), s);
  cuda::copy(b, a, s);  // device to device, another shape of the same count
  cuda::copy(tensor::view_of(std::span<float>(back)), b, s);
  s.synchronize();
  CHECK(back == host);
  cuda::zero(b, s);
  cuda::copy(tensor::view_of(std::span<float>(back)), b, s);
  s.synchronize();
  CHECK(back == std::vector<float>(1001, 0.f));
  CHECK_THROWS_AS(cuda::copy(a, tensor::view_of(std::span<const float>(host.data(), 10)), s), tensor::tensor_error);
}

TEST_CASE("cuda moves a mactor tensor to the device and back", "[cuda][device]") {
  mactor::testing::require_cuda_device();
  tensor::tensor host({3, 5}, tensor::dtype::bfloat16, tensor::memory_kind::other);
  auto elements = host.host<tensor::bfloat16>();
  for (std::size_t i = 0; i < elements.size(); ++i) elements[i] = tensor::to_bfloat16(float(i) - 4.5f);
  const cuda::device_buffer on_device = cuda::to_device(host);
  CHECK(on_device.view().shape == host.shape());
  CHECK(on_device.view().where == tensor::device{tensor::device_type::cuda, 0});
  const tensor::tensor back = cuda::to_host(on_device, tensor::memory_kind::other);
  CHECK(back.shape() == host.shape());
  CHECK(std::memcmp(back.data(), host.data(), host.nbytes()) == 0);
}

TEST_CASE("cuda device allocator reuses blocks and tracks peaks", "[cuda][device]") {
  mactor::testing::require_cuda_device();
  auto& alloc = cuda::device_allocator(0);
  alloc.release_cached();
  const auto before = alloc.stats();
  void* p = nullptr;
  {
    cuda::device_buffer a({1 << 20}, tensor::dtype::float32);  // 4 MiB
    p = a.data();
    CHECK(alloc.stats().allocated_bytes == before.allocated_bytes + (4 << 20));
  }
  cuda::device_buffer b({(1 << 20) - 5}, tensor::dtype::float32);
  CHECK(b.data() == p);
  CHECK(alloc.stats().cache_hits == before.cache_hits + 1);
  CHECK(alloc.stats().peak_allocated_bytes >= before.allocated_bytes + (4 << 20));
}

TEST_CASE("cuda event reports completion without blocking", "[cuda][device]") {
  mactor::testing::require_cuda_device();
  cuda::stream s;
  cuda::event done;
  std::vector<float> host(1 << 20, 1.f);
  cuda::device_buffer d({1 << 20}, tensor::dtype::float32);
  cuda::copy(d, tensor::view_of(std::span<const float>(host)), s);
  done.record(s);
  cuda::stream other;
  done.make_wait(other);
  other.synchronize();
  CHECK(done.ready());
}
