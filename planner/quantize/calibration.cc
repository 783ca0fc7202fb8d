#include "quantize/calibration.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/error.h"

namespace kiln::planner::quantize {
namespace {

Range clamp_to(Range r, Range observed) { return Range{std::max(r.min, observed.min), std::min(r.max, observed.max)}; }

// The Kullback-Leibler divergence of the reference distribution (the first
// `kept` bins of `abs_counts`, those beyond added to the last) from its
// quantization to `levels` levels (TensorRT's calibration).
double divergence(const std::vector<uint64_t>& abs_counts, size_t kept, size_t levels, uint64_t beyond,
                  std::vector<double>& p, std::vector<double>& q) {
  p.assign(abs_counts.begin(), abs_counts.begin() + static_cast<std::ptrdiff_t>(kept));
  p[kept - 1] += static_cast<double>(beyond);
  q.assign(kept, 0.0);
  const size_t per_level = kept / levels;
  for (size_t j = 0; j < levels; ++j) {
    const size_t start = j * per_level, stop = j + 1 == levels ? kept : start + per_level;
    double level_count = 0;
    size_t nonzero = 0;
    for (size_t k = start; k < stop; ++k) {
      level_count += static_cast<double>(abs_counts[k]);
      nonzero += p[k] != 0 ? 1 : 0;
    }
    if (nonzero == 0) continue;
    for (size_t k = start; k < stop; ++k) q[k] = p[k] != 0 ? level_count / static_cast<double>(nonzero) : 0.0;
  }
  double p_total = 0, q_total = 0;
  for (size_t k = 0; k < kept; ++k) {
    p_total += p[k];
    q_total += q[k];
  }
  if (p_total <= 0 || q_total <= 0) return INFINITY;
  double kl = 0;
  for (size_t k = 0; k < kept; ++k) {
    if (p[k] == 0) continue;
    const double pk = p[k] / p_total, qk = std::max(q[k] / q_total, 1e-12);
    kl += pk * std::log(pk / qk);
  }
  return kl;
}

double round_half_even(double v) { return std::nearbyint(v); }

}  // namespace

TensorStats::TensorStats(int bins) : bins_(bins) {
  if (bins < 0 || bins % 2 != 0) fail("calibration histogram: ", bins, " bins (an even number expected)");
  pos_.assign(static_cast<size_t>(bins), 0);
  neg_.assign(static_cast<size_t>(bins), 0);
}

void TensorStats::widen_to(double max_abs) {
  const size_t half = static_cast<size_t>(bins_) / 2;
  while (width_ * bins_ < max_abs) {
    for (std::vector<uint64_t>* h : {&pos_, &neg_}) {
      for (size_t k = 0; k < half; ++k) (*h)[k] = (*h)[2 * k] + (*h)[2 * k + 1];
      std::fill(h->begin() + static_cast<std::ptrdiff_t>(half), h->end(), 0);
    }
    width_ *= 2;
  }
}

void TensorStats::add(const float* values, size_t count) {
  float lo = INFINITY, hi = -INFINITY;
  uint64_t finite = 0;
  for (size_t i = 0; i < count; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    ++finite;
  }
  if (finite == 0) return;
  min_ = count_ == 0 ? lo : std::min(min_, lo);
  max_ = count_ == 0 ? hi : std::max(max_, hi);
  count_ += finite;
  if (bins_ == 0) return;
  const double max_abs = std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
  if (width_ == 0) {
    if (max_abs == 0) {
      zeros_ += finite;
      return;
    }
    width_ = max_abs / bins_;
  } else if (max_abs > width_ * bins_) {
    widen_to(max_abs);
  }
  const size_t last = static_cast<size_t>(bins_) - 1;
  for (size_t i = 0; i < count; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) continue;
    if (v == 0) {
      ++zeros_;
      continue;
    }
    const size_t k = std::min(last, static_cast<size_t>(std::fabs(static_cast<double>(v)) / width_));
    ++(v >= 0 ? pos_ : neg_)[k];
  }
}

Range TensorStats::percentile(double percentile, bool symmetric) const {
  if (bins_ == 0) fail("internal error: percentile calibration without a histogram");
  if (width_ == 0) return observed();
  const size_t n = static_cast<size_t>(bins_);
  const double total = static_cast<double>(count_);
  const float w = static_cast<float>(width_);
  if (symmetric) {
    const double target = percentile / 100.0 * total;
    double cumulative = 0;
    size_t k = 0;
    for (; k + 1 < n; ++k) {
      cumulative += static_cast<double>(pos_[k] + neg_[k] + (k == 0 ? zeros_ : 0));
      if (cumulative >= target) break;
    }
    const float t = static_cast<float>(k + 1) * w;
    return clamp_to(Range{-t, t}, observed());
  }
  // The bins from the most negative to the most positive: neg_[n-1] ..
  // neg_[0], pos_[0] .. pos_[n-1]; bin j of that order.
  const auto count_at = [&](size_t j) { return j < n ? neg_[n - 1 - j] : pos_[j - n] + (j == n ? zeros_ : 0); };
  const auto lower_edge = [&](size_t j) {
    return j < n ? -static_cast<float>(n - j) * w : static_cast<float>(j - n) * w;
  };
  const double cut = (100.0 - percentile) / 200.0 * total;
  size_t lo = 0, hi = 2 * n - 1;
  for (double c = 0; lo < 2 * n - 1; ++lo) {
    c += static_cast<double>(count_at(lo));
    if (c > cut) break;
  }
  for (double c = 0; hi > 0; --hi) {
    c += static_cast<double>(count_at(hi));
    if (c > cut) break;
  }
  return clamp_to(Range{lower_edge(lo), lower_edge(hi) + w}, observed());
}

Range TensorStats::entropy() const {
  if (bins_ == 0) fail("internal error: entropy calibration without a histogram");
  if (width_ == 0) return observed();
  const size_t n = static_cast<size_t>(bins_);
  std::vector<uint64_t> abs_counts(n);
  size_t used = 0;
  for (size_t k = 0; k < n; ++k) {
    abs_counts[k] = pos_[k] + neg_[k];
    if (abs_counts[k] != 0) used = k + 1;
  }
  const size_t levels = min_ >= 0 || max_ <= 0 ? 256 : 128;
  if (used <= levels) return observed();
  uint64_t beyond = 0;
  for (size_t k = levels; k < used; ++k) beyond += abs_counts[k];
  std::vector<double> p, q;
  double best = INFINITY;
  size_t best_kept = used;
  for (size_t kept = levels; kept <= used; ++kept) {
    const double kl = divergence(abs_counts, kept, levels, beyond, p, q);
    if (kl < best) {
      best = kl;
      best_kept = kept;
    }
    if (kept < used) beyond -= abs_counts[kept];
  }
  const float t = static_cast<float>(best_kept) * static_cast<float>(width_);
  return clamp_to(Range{-t, t}, observed());
}

void quant_limits(DType dtype, bool symmetric, int32_t* out_min, int32_t* out_max, bool reduce_range) {
  if (reduce_range && (dtype == DType::INT8 || dtype == DType::UINT8)) {
    *out_min = dtype == DType::INT8 ? -64 : 0;
    *out_max = dtype == DType::INT8 ? 64 : 127;
  } else if (dtype == DType::INT8) {
    *out_min = symmetric ? -127 : -128;
    *out_max = 127;
  } else if (dtype == DType::UINT8) {
    *out_min = 0;
    *out_max = symmetric ? 254 : 255;
  } else {
    fail("internal error: quantization to ", dtype_str(dtype));
  }
}

QuantParams quant_params(Range range, DType dtype, bool symmetric, bool reduce_range) {
  int32_t qmin = 0, qmax = 0;
  quant_limits(dtype, symmetric, &qmin, &qmax, reduce_range);
  float rmin = std::min(range.min, 0.f), rmax = std::max(range.max, 0.f);
  if (symmetric) {
    const float a = std::max(std::fabs(rmin), std::fabs(rmax));
    rmin = -a;
    rmax = a;
  }
  const double scale = static_cast<double>(rmax - rmin) / static_cast<double>(qmax - qmin);
  QuantParams p;
  p.dtype = dtype;
  if (scale < FLT_MIN) return p;  // scale 1, zero point 0
  p.zero_point = static_cast<int32_t>(symmetric ? round_half_even((qmin + qmax) / 2.0)
                                                : round_half_even(qmin - static_cast<double>(rmin) / scale));
  p.scale = static_cast<float>(scale);
  return p;
}

int32_t quantize_value(float x, const QuantParams& params) {
  int32_t lo = 0, hi = 0;
  quant_limits(params.dtype, false, &lo, &hi);
  const float v = std::nearbyintf(x / params.scale) + static_cast<float>(params.zero_point);
  if (!(v == v)) return params.zero_point;
  return static_cast<int32_t>(std::min(std::max(v, static_cast<float>(lo)), static_cast<float>(hi)));
}

}  // namespace kiln::planner::quantize
