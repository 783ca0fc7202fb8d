// The shared backend layer (backends/common) on its own: the stride
// helpers, strided walks and their collapse, the split of a reduction, the
// in-place rules, and the kernel and ONNX op tables agreeing with each
// other. The backends' conformance runs (conformance.onnx_node_tests.*)
// check it end to end.

#include <gtest/gtest.h>

#include <string.h>

#include "kiln/backends/common/delegate_graph.h"
#include "kiln/backends/common/kernel_table.h"
#include "kiln/backends/common/op_support.h"
#include "kiln/backends/common/shape.h"

namespace kiln::backends {
namespace {

TEST(BackendCommon, BroadcastStridesAreZeroWhereATensorStretches) {
  const int64_t dims[] = {3, 1, 5};
  const Tensor t(nullptr, DType::FLOAT32, dims, 3);
  const int64_t out[] = {2, 3, 4, 5};
  int64_t strides[4];
  ASSERT_TRUE(broadcast_strides(t, out, 4, strides));
  EXPECT_EQ(strides[0], 0);
  EXPECT_EQ(strides[1], 5);
  EXPECT_EQ(strides[2], 0);
  EXPECT_EQ(strides[3], 1);
  const int64_t wrong[] = {2, 3, 4, 6};
  EXPECT_FALSE(broadcast_strides(t, wrong, 4, strides));
}

TEST(BackendCommon, CollapseMergesOnlyWhatEveryOperandWalksAsOne) {
  // [2, 3, 4] out of a contiguous A and a B broadcast along dim 1.
  StridedWalk<2> walk;
  walk.rank = 3;
  const int64_t dims[] = {2, 3, 4}, a[] = {12, 4, 1}, b[] = {4, 0, 1};
  for (int d = 0; d < 3; ++d) {
    walk.dims[d] = dims[d];
    walk.strides[0][d] = a[d];
    walk.strides[1][d] = b[d];
  }
  collapse(&walk);
  ASSERT_EQ(walk.rank, 3u);  // B breaks both merges
  StridedWalk<1> one;
  one.rank = 4;
  const int64_t d1[] = {2, 1, 3, 4}, s1[] = {12, 99, 4, 1};
  for (int d = 0; d < 4; ++d) {
    one.dims[d] = d1[d];
    one.strides[0][d] = s1[d];
  }
  collapse(&one);
  ASSERT_EQ(one.rank, 1u);  // the 1 dropped, the rest contiguous
  EXPECT_EQ(one.dims[0], 24);
  EXPECT_EQ(one.strides[0][0], 1);
}

TEST(BackendCommon, ReduceGeometryMergesNeighboursOfOneKind) {
  const int64_t dims[] = {2, 3, 4, 5};
  const Tensor x(nullptr, DType::FLOAT32, dims, 4);
  const bool reduced[] = {false, true, true, false};
  const ReduceGeometry g = reduce_geometry(x, reduced);
  ASSERT_EQ(g.reduced_rank, 1u);  // axes 1 and 2 are one contiguous group
  EXPECT_EQ(g.reduced_dims[0], 12);
  EXPECT_EQ(g.reduced_strides[0], 5);
  ASSERT_EQ(g.kept_rank, 2u);  // axes 0 and 3 are not neighbours in memory
  EXPECT_EQ(g.kept_count, 10);
  EXPECT_EQ(g.reduced_count, 12);
}

TEST(BackendCommon, OverlapIsByArenaAndOffsetOrByAddress) {
  const int64_t dims[] = {4};
  float a[8];
  const Tensor x(a, DType::FLOAT32, dims, 1), y(a + 2, DType::FLOAT32, dims, 1), z(a + 4, DType::FLOAT32, dims, 1);
  EXPECT_TRUE(tensors_overlap(x, y));
  EXPECT_FALSE(tensors_overlap(x, z));
  EXPECT_TRUE(same_bytes(x, x));
  EXPECT_FALSE(same_bytes(x, y));
}

bool device_kernel(const char* name) {
  for (const KernelInfo& k : kDeviceKernels) {
    if (strcmp(k.name, name) == 0) return true;
  }
  return false;
}

TEST(BackendCommon, OrderedKernelTablesNameDeviceKernels) {
  for (const UnaryKernel& u : kUnaryKernels) {
    EXPECT_TRUE(device_kernel(u.name) || strcmp(u.name, "PowScalar") == 0) << u.name;
  }
  for (const char* b : kBinaryKernels) EXPECT_TRUE(device_kernel(b) || strcmp(b, "Pow") == 0) << b;
  for (const char* r : kReduceKernels) EXPECT_TRUE(device_kernel(r)) << r;
  EXPECT_EQ(kernel_index(kBinaryKernels, "Pow"), 6);
  EXPECT_EQ(kernel_index(kUnaryKernels, "Resize"), -1);
}

TEST(BackendCommon, EveryOnnxOpLowersToAKernelADeviceCanRun) {
  const KernelTable device;
  for (const OnnxOp& op : kOnnxOps) {
    EXPECT_TRUE(device.find(op.kernel) != nullptr || strcmp(op.kernel, "Pow") == 0) << op.name;
    for (uint8_t i = 0; i < op.num_constant_inputs; ++i) EXPECT_GE(op.constant_inputs[i], 1) << op.name;
  }
}

}  // namespace
}  // namespace kiln::backends
