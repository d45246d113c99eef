// The pseudo-device (tests/kernels/pseudo_device.hpp) is strict in the ways the model port relies
// on: device tensors round-trip through upload and download, kernels on them give the CPU
// kernels' bits, a host buffer handed to a device kernel is an error naming the kernel, and a
// host read of device memory outside a kernel kills the process with a report.
#include "tests/kernels/pseudo_device.hpp"

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/tensor_ops.hpp"
#include "tensor/transfer.hpp"

using namespace mactor;

namespace {
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}
}  // namespace

TEST_CASE("pseudo-device tensors round-trip and its kernels give the CPU kernels' bits") {
  test::pseudo_device device;
  const int rows = 7, in = 5, out = 3;
  auto x = random_floats(rows * in, 1), w = random_floats(out * in, 2);
  std::vector<float> y_host(rows * out);
  kernels::linear_forward(tensor::view_of(std::span<const float>(x)), tensor::view_of(std::span<const float>(w)),
                          tensor::view_of(std::span<float>(y_host)), rows, in, out);

  const auto calls_before = device.kernel_calls();
  auto dx = tensor::copy_to(tensor::view_of(std::span<const float>(x)), device.where, tensor::memory_kind::other);
  auto dw = tensor::copy_to(tensor::view_of(std::span<const float>(w)), device.where, tensor::memory_kind::other);
  tensor::tensor dy({rows, out}, tensor::dtype::float32, tensor::memory_kind::other, device.where);
  kernels::linear_forward(dx, dw, dy, rows, in, out);
  CHECK(device.kernel_calls() == calls_before + 1);
  CHECK(tensor::host_copy<float>(dx) == x);
  CHECK(tensor::host_copy<float>(dy) == y_host);
  CHECK_THROWS_WITH(dy.host<float>(), Catch::Contains("cuda:0"));
}

TEST_CASE("a host buffer or host ids handed to a pseudo-device kernel is an error naming the kernel") {
  test::pseudo_device device;
  std::vector<float> host(12, 1.0f);
  tensor::tensor on_device({12}, tensor::dtype::float32, tensor::memory_kind::other, device.where);
  // A view that claims the device but points into host memory (a port that relabels a buffer).
  const tensor::tensor_view relabelled{host.data(), {12}, tensor::dtype::float32, device.where};
  CHECK_THROWS_WITH(kernels::add(on_device, relabelled), Catch::Contains("add") && Catch::Contains("view 2"));
  CHECK_THROWS_WITH(kernels::copy(on_device, tensor::view_of(std::span<const float>(host))),
                    Catch::Contains("copy") && Catch::Contains("on cpu"));  // the entry point's own check

  tensor::tensor table({4, 3}, tensor::dtype::float32, tensor::memory_kind::other, device.where);
  const std::vector<std::int32_t> ids{0, 1, 2, 3};
  CHECK_THROWS_WITH(kernels::embedding_forward(on_device, table, ids.data(), 4, 3, 0, 4),
                    Catch::Contains("embedding_forward") && Catch::Contains("token ids"));
  const tensor::index_array device_ids(ids, device.where);
  CHECK_NOTHROW(kernels::embedding_forward(on_device, table, device_ids.data(), 4, 3, 0, 4));
}

TEST_CASE("a host read of pseudo-device memory outside a kernel kills the process with a report") {
  test::pseudo_device device;
  tensor::tensor on_device({64}, tensor::dtype::float32, tensor::memory_kind::other, device.where);
  const auto* raw = static_cast<const volatile float*>(on_device.data());
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(pipe_fds[1], 2);
    signal(SIGSEGV, SIG_DFL);
    test::pseudo_device again;  // the report handler, installed in the child
    float sum = raw[3];         // a host read the port missed
    std::_Exit(sum == 0.0f ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) report.append(buffer, std::size_t(n));
  close(pipe_fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV));
  CHECK_THAT(report, Catch::Contains("the host touched device memory outside a kernel"));
}
