// cuBLASLt GEMM. cuBLASLt is column-major: a row-major [m, n] matrix is a column-major [n, m]
// one, so c = op(a) · op(b) is computed as c^T = op(b)^T · op(a)^T with the operands swapped.
#include "kernels/cuda/gemm.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "tensor/cuda/device.hpp"
#include "tensor/cuda/device_allocator.hpp"

namespace mactor::kernels::cuda {

namespace {

constexpr std::size_t workspace_bytes = std::size_t(32) << 20;  // cuBLAS's recommendation for Hopper

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw mactor::cuda::cuda_error(std::string(what) + ": " + cublasLtGetStatusString(status) + " (" +
                                   std::to_string(int(status)) + ")");
}

// One cuBLASLt handle and workspace per thread and device.
struct lt_context {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  int device = -1;

  lt_context() { check_cublas(cublasLtCreate(&handle), "cublasLtCreate"); }
  ~lt_context() {
    if (workspace) mactor::cuda::device_allocator(device).deallocate(workspace);
    cublasLtDestroy(handle);
  }
};

lt_context& context() {
  thread_local lt_context ctx;
  int device = 0;
  mactor::cuda::detail::check(cudaGetDevice(&device), "cudaGetDevice");
  if (ctx.device != device) {
    if (ctx.workspace) mactor::cuda::device_allocator(ctx.device).deallocate(ctx.workspace);
    ctx.workspace = nullptr;
    ctx.workspace = mactor::cuda::device_allocator(device).allocate(workspace_bytes);
    ctx.device = device;
  }
  return ctx;
}

// The largest power of two (up to 256) that divides p: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told, and a row slice of a tensor need not be.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// Owning cuBLASLt descriptors, destroyed in any case.
struct descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// A stored row-major matrix of `rows` x `cols` with leading dimension ld, as cuBLASLt's
// column-major layout (cols x rows).
cublasLtMatrixLayout_t layout_of(cudaDataType_t type, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_cublas(cublasLtMatrixLayoutCreate(&layout, type, cols, rows, ld), "cublasLtMatrixLayoutCreate");
  return layout;
}

// The operation and the three layouts. Column-major: the first operand is the stored b (op =
// trans_b), the second the stored a (op = trans_a); c is read (beta) and written in place.
void describe(descriptors& d, cudaDataType_t type, cudaDataType_t c_type, bool trans_a, bool trans_b, int m, int n, int k, int lda,
              int ldb, int ldc) {
  check_cublas(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first),
               "cublasLtMatmulDescSetAttribute");
  check_cublas(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second),
               "cublasLtMatmulDescSetAttribute");
  d.a = trans_b ? layout_of(type, n, k, ldb) : layout_of(type, k, n, ldb);
  d.b = trans_a ? layout_of(type, k, m, lda) : layout_of(type, m, k, lda);
  d.c = layout_of(c_type, m, n, ldc);
}

// cuBLASLt's first choice for these descriptors within our workspace and the operands' alignment.
cublasLtMatmulAlgo_t pick_algorithm(lt_context& ctx, descriptors& d, const void* a, const void* b, const void* c) {
  check_cublas(cublasLtMatmulPreferenceCreate(&d.preference), "cublasLtMatmulPreferenceCreate");
  std::size_t workspace = workspace_bytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace, sizeof workspace),
               "cublasLtMatmulPreferenceSetAttribute");
  const std::uint32_t alignments[] = {alignment_of(b), alignment_of(a), alignment_of(c), alignment_of(c)};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    check_cublas(cublasLtMatmulPreferenceSetAttribute(d.preference, alignment_attributes[i], &alignments[i],
                                                      sizeof alignments[i]),
                 "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(ctx.handle, d.op, d.a, d.b, d.c, d.c, d.preference, 1, &heuristic,
                                              &found),
               "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) throw mactor::cuda::cuda_error("cublasLt: no algorithm for this GEMM");
  return heuristic.algo;
}

void matmul(cudaDataType_t type, cudaDataType_t c_type, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
            int lda, const void* b, int ldb, float beta, void* c, int ldc, stream_handle s) {
  if (m == 0 || n == 0) return;
  if (k == 0) throw mactor::cuda::cuda_error("cuda::gemm: k = 0 (c = beta * c) is not supported on a CUDA device yet");
  lt_context& ctx = context();
  descriptors d;
  describe(d, type, c_type, trans_a, trans_b, m, n, k, lda, ldb, ldc);
  const cublasLtMatmulAlgo_t algo = pick_algorithm(ctx, d, a, b, c);
  check_cublas(cublasLtMatmul(ctx.handle, d.op, &alpha, b, d.a, a, d.b, &beta, c, d.c, c, d.c, &algo,
                              ctx.workspace, workspace_bytes, s),
               "cublasLtMatmul");
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc, stream_handle s) {
  matmul(CUDA_R_32F, CUDA_R_32F, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, s);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const tensor::bfloat16* a, int lda,
          const tensor::bfloat16* b, int ldb, float beta, tensor::bfloat16* c, int ldc, stream_handle s) {
  matmul(CUDA_R_16BF, CUDA_R_16BF, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, s);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const tensor::bfloat16* a, int lda,
          const tensor::bfloat16* b, int ldb, float beta, float* c, int ldc, stream_handle s) {
  matmul(CUDA_R_16BF, CUDA_R_32F, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, s);
}

}  // namespace mactor::kernels::cuda
