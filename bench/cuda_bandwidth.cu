// Element-wise bandwidth of the CUDA backend's kernels (kernels.cuh, the
// same launches the delegate records) against a device-to-device copy of
// the same bytes, on one GPU: Relu (read n, write n floats) and Add (read
// 2n, write n), each timed with CUDA events over 50 launches after a
// warm-up. Bandwidth = bytes read + written / time; the copy moves n floats
// in and n out. Target (issue 22): element-wise at >= 85% of the copy's.
//
// Built and run by bench/cuda_gpu.sh:
//   nvcc -O3 -std=c++17 -arch=native -I. -Ibackends/cuda/runtime/src \
//        -Ibackends/cuda/runtime/include bench/cuda_bandwidth.cu -o cuda_bandwidth

#include <stdio.h>

#include "kernels.cuh"

using namespace kiln::backends::cuda::gpu;

#define CHECK(x)                                               \
  do {                                                         \
    cudaError_t e_ = (x);                                      \
    if (e_ != cudaSuccess) {                                   \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                                \
    }                                                          \
  } while (0)

template <typename F>
float time_ms(cudaStream_t s, F&& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) f();
  cudaEventRecord(a, s);
  for (int i = 0; i < 50; ++i) f();
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 50.f;
}

int main() {
  const uint64_t n = uint64_t{64} << 20;  // 64 Mi floats, 256 MiB per tensor
  float *x, *y, *z;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMalloc(&z, n * 4));
  CHECK(cudaMemset(x, 0, n * 4));
  CHECK(cudaMemset(y, 0, n * 4));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  // The grid lower.cc gives element-wise kernels: 256 threads, at most 4096 blocks.
  Launch relu;
  relu.kind = LaunchKind::kUnary;
  relu.grid[0] = 4096;
  relu.unary = UnaryArgs{x, z, n, kRelu, 0.f, 0.f, Activation()};
  Launch add;
  add.kind = LaunchKind::kBinary;
  add.grid[0] = 4096;
  add.binary = BinaryArgs();
  add.binary.a = x;
  add.binary.b = y;
  add.binary.y = z;
  add.binary.n = n;
  add.binary.op = kAdd;
  add.binary.rank = 1;
  add.binary.dims[0] = static_cast<uint32_t>(n);
  add.binary.a_strides[0] = add.binary.b_strides[0] = 1;
  const float copy = time_ms(s, [&] { cudaMemcpyAsync(z, x, n * 4, cudaMemcpyDeviceToDevice, s); });
  const float relu_ms = time_ms(s, [&] { enqueue_kernel_impl(relu, s); });
  const float add_ms = time_ms(s, [&] { enqueue_kernel_impl(add, s); });
  CHECK(cudaGetLastError());
  const double gb = n * 4 / 1e9;
  const double copy_bw = 2 * gb / (copy / 1e3), relu_bw = 2 * gb / (relu_ms / 1e3), add_bw = 3 * gb / (add_ms / 1e3);
  printf("| kernel | ms | GB/s | vs copy |\n|---|---|---|---|\n");
  printf("| device-to-device copy | %.3f | %.0f | 1.00 |\n", copy, copy_bw);
  printf("| Relu (unary_kernel) | %.3f | %.0f | %.2f |\n", relu_ms, relu_bw, relu_bw / copy_bw);
  printf("| Add (binary_kernel) | %.3f | %.0f | %.2f |\n", add_ms, add_bw, add_bw / copy_bw);
  return 0;
}
