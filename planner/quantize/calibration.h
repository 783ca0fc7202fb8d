// Calibration statistics: what the quantizer keeps of one tensor's values
// over a calibration set, in memory that does not grow with the set, and the
// ranges and quantization parameters it derives from them.
//
// TensorStats holds the minimum and maximum and, for the percentile and
// entropy methods, a histogram of the values in two halves that share one
// bin width: bins_ counts of |x| for x >= 0 and as many for x < 0 (bin k holds
// |x| in [k w, (k+1) w)). The width is set by the first nonzero value's batch
// (its largest |x| spans all bins) and doubles, adding neighbouring bins in
// pairs, whenever a later batch reaches beyond the last bin, so a tensor costs
// 2 x bins counters however many samples pass. Exact zeros (half of a
// ReLU's output, often) are counted apart: every range quantizes zero
// exactly, so they take no part in choosing one. Values that are not finite
// are left out of everything.
//
// The ranges (each clamped to the observed minimum and maximum):
//   min/max      the observed minimum and maximum;
//   percentile   symmetric: +-t where t is the upper edge of the |x| bin in
//                which the cumulative share reaches p percent; otherwise
//                (100 - p) / 2 percent cut from each end of the values;
//   entropy      the clipping threshold t on |x| whose quantized
//                distribution is closest to the observed one (least
//                Kullback-Leibler divergence, as TensorRT's calibrator
//                chooses it): the histogram up to t, the bins beyond added to
//                the last, against the same bins merged into the levels the
//                threshold leaves (128 for a tensor of both signs, 256 for
//                one of one sign) and spread back evenly over each level's
//                nonzero bins.
//
// Quantization parameters follow ONNX Runtime's arithmetic: the range is
// widened to hold 0; symmetric ranges become +-max(|min|, |max|) on
// [-127, 127] for int8 (zero point 0) and [0, 254] for uint8 (zero point
// 127); scale = (max - min) / (qmax - qmin), computed in double and stored as
// float32; zero point = round(qmin - min / scale), half to even; a range of
// width 0 gets scale 1 and zero point 0.

#ifndef KILN_PLANNER_QUANTIZE_CALIBRATION_H_
#define KILN_PLANNER_QUANTIZE_CALIBRATION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/host_tensor.h"

namespace kiln::planner::quantize {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

struct Range {
  float min = 0.f, max = 0.f;
};

class TensorStats {
 public:
  // `bins` per sign; 0: minimum and maximum only.
  explicit TensorStats(int bins = 0);

  void add(const float* values, size_t count);

  bool empty() const { return count_ == 0; }
  uint64_t count() const { return count_; }
  Range observed() const { return Range{min_, max_}; }
  // Histogram bin width (0 until a nonzero value arrived).
  double bin_width() const { return width_; }

  Range minmax() const { return observed(); }
  // `percentile` in (0, 100]; needs a histogram.
  Range percentile(double percentile, bool symmetric) const;
  // Needs a histogram.
  Range entropy() const;

 private:
  void widen_to(double max_abs);

  int bins_;
  uint64_t count_ = 0;
  float min_ = 0.f, max_ = 0.f;
  double width_ = 0.0;
  uint64_t zeros_ = 0;               // exact zeros, kept out of the bins
  std::vector<uint64_t> pos_, neg_;  // counts of x >= 0 and of x < 0 by |x|
};

// What a range quantizes to: scale and zero point of `dtype` (INT8 or UINT8).
struct QuantParams {
  float scale = 1.f;
  int32_t zero_point = 0;
  DType dtype = DType::UINT8;
};

// `reduce_range`: weights on 7 bits as ONNX Runtime's reduce_range puts
// them, [-64, 64] for int8 (symmetric or not) and [0, 127] for uint8.
QuantParams quant_params(Range range, DType dtype, bool symmetric, bool reduce_range = false);

// `dtype`'s integer range; symmetric int8 gives up -128, symmetric uint8 255;
// reduced as quant_params says.
void quant_limits(DType dtype, bool symmetric, int32_t* out_min, int32_t* out_max, bool reduce_range = false);

// round(x / scale) + zero point in float32, half to even, saturated to the
// dtype's full range (ONNX QuantizeLinear).
int32_t quantize_value(float x, const QuantParams& params);

}  // namespace kiln::planner::quantize

#endif  // KILN_PLANNER_QUANTIZE_CALIBRATION_H_
