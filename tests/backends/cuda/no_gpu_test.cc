// The CUDA backend's GPU build on a machine without a GPU (or without a
// driver): every entry point that needs a device returns an Error naming
// cuda:N, nothing crashes, and nothing was allocated.

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "kiln/backends/cuda/cuda_backend.h"

namespace kiln::backends::cuda {
namespace {

TEST(CudaNoGpu, ArenasAndCopiesAreRefusedNamingTheDevice) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) GTEST_SKIP() << "a GPU is present";
  gpu::CudaBackend backend{CudaOptions{}};
  DeviceBuffer buffer;
  EXPECT_EQ(backend.allocate(Device(DeviceType::CUDA, 0), 1024, 256, &buffer), Error::kDeviceError);
  EXPECT_EQ(backend.allocate(Device(DeviceType::CUDA, 3), 1024, 256, &buffer), Error::kDeviceError);
  EXPECT_EQ(buffer.handle, nullptr);
  EXPECT_EQ(backend.live_arenas(), 0u);
  uint8_t bytes[16] = {};
  DeviceBuffer fake{bytes, sizeof(bytes)};
  EXPECT_EQ(backend.copy_to_device(Device(DeviceType::CUDA, 0), fake, 0, bytes, 16), Error::kDeviceError);
  EXPECT_EQ(backend.copy_to_host(Device(DeviceType::CUDA, 0), bytes, fake, 0, 16), Error::kDeviceError);
  backend.shutdown();
}

}  // namespace
}  // namespace kiln::backends::cuda
