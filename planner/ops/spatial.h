// Spatial geometry shared by Conv and the pooling ops: resolves kernel,
// strides, dilations, pads and auto_pad (and ceil_mode for pooling) into
// explicit per-axis values and the output size. 1-D ops are expressed as
// 2-D ones of height 1, which is what the kernels run; the N-D pooling and
// transposed-convolution kernels take up to 3 axes.

#ifndef KILN_PLANNER_OPS_SPATIAL_H_
#define KILN_PLANNER_OPS_SPATIAL_H_

#include <cstdint>
#include <vector>

#include "ops/op_registry.h"

namespace kiln::planner {

struct Spatial {
  // Per spatial axis (1 or 2 of them, up to 3 where `max_axes` allows).
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, out;

  // The 2-D form the kernels take: (h, w) pairs and (top, left, bottom, right).
  std::vector<int32_t> kernel2() const;
  std::vector<int32_t> strides2() const;
  std::vector<int32_t> dilations2() const;
  std::vector<int32_t> pads4() const;
};

// `in` holds the input's spatial dims, `kernel` the window (from the
// attribute or the weight). Reads strides, dilations, pads, auto_pad and,
// when `allow_ceil`, ceil_mode. More than `max_axes` spatial axes is
// refused as not supported.
Spatial resolve_spatial(OpContext& ctx, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                        bool allow_ceil, bool allow_dilations, size_t max_axes = 2);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_OPS_SPATIAL_H_
