// NonMaxSuppression on the CPU, self-contained (standard headers and resize_taps.h's
// `rounded` only): generated code reaches it through irregular.h, and the core library binds it
// (dnnfusion._core.nms_f32) for the operators compile() runs on the host after the kernels
// (dnnfusion/host_tail.py), where the NumPy oracle's loop took 88 ms on SSD's 1917 boxes x 21
// classes against ONNX Runtime's 1.6.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "resize_taps.h"

namespace dnnf::irr {

namespace detail {
using taps_detail::rounded;
}  // namespace detail

// ---- NonMaxSuppression --------------------------------------------------------------------
// boxes [B, n, 4] (center_point_box 0: [y1, x1, y2, x2] any diagonal corners; 1: [xc, yc, w,
// h]), scores [B, classes, n]. Writes rows (batch, class, box) to `selected`, which must hold
// nms_capacity(...) rows of 3, and returns how many: per (batch, class), boxes with score >
// *score_threshold (when given) by descending score (equal scores by lower index), each kept
// unless its IoU with a kept box exceeds iou_threshold, at most max_per_class of them.
// Arithmetic is float32 in the oracle's order of operations.
inline long nms_capacity(long B, long classes, long n, long max_per_class) {
  return B * classes * std::max(0L, std::min(n, max_per_class));
}

inline long nms_f32(long B, long classes, long n, const float* boxes, const float* scores,
                    long max_per_class, float iou_threshold, const float* score_threshold,
                    int center_point_box, int64_t* selected) {
  if (center_point_box != 0 && center_point_box != 1) {
    throw std::invalid_argument("NonMaxSuppression: center_point_box must be 0 or 1");
  }
  std::vector<float> c(static_cast<size_t>(n) * 4), area(static_cast<size_t>(n));  // x_min, y_min, x_max, y_max
  std::vector<long> order, kept;
  long rows = 0;
  for (long b = 0; b < B; ++b) {
    for (long i = 0; i < n; ++i) {
      const float* p = boxes + (b * n + i) * 4;
      float* q = c.data() + i * 4;
      if (center_point_box == 0) {
        q[0] = std::min(p[1], p[3]), q[1] = std::min(p[0], p[2]);
        q[2] = std::max(p[1], p[3]), q[3] = std::max(p[0], p[2]);
      } else {
        q[0] = p[0] - p[2] / 2, q[1] = p[1] - p[3] / 2;
        q[2] = p[0] + p[2] / 2, q[3] = p[1] + p[3] / 2;
      }
      // once per box: the same rounded product the pairwise test computed per pair
      area[i] = detail::rounded((q[2] - q[0]) * (q[3] - q[1]));
    }
    for (long cl = 0; cl < classes; ++cl) {
      const float* s = scores + (b * classes + cl) * n;
      order.clear();
      for (long i = 0; i < n; ++i) {
        if (!score_threshold || s[i] > *score_threshold) order.push_back(i);
      }
      // The oracle's order (a stable sort of -score: NaN last, equal scores by lower index),
      // taken lazily from a heap: only the boxes examined until max_per_class are kept get
      // ordered (post-processing examines a few hundred of thousands of candidates).
      auto first = [s](long i, long j) {  // whether box i comes before box j
        const float x = -s[i], y = -s[j];
        if (x != x || y != y) return (x == x) != (y == y) ? x == x : i < j;
        return x < y || (!(y < x) && i < j);
      };
      auto later = [&first](long i, long j) { return first(j, i); };
      std::make_heap(order.begin(), order.end(), later);
      kept.clear();
      for (auto end = order.end(); end != order.begin();) {
        if (static_cast<long>(kept.size()) >= max_per_class) break;
        std::pop_heap(order.begin(), end, later);
        const long i = *--end;
        const float* bi = c.data() + i * 4;
        const float area_i = area[i];
        bool suppressed = false;
        for (long j : kept) {
          const float* bj = c.data() + j * 4;
          const float ix = std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]);
          const float iy = std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]);
          const float inter = detail::rounded(ix * iy);
          const float area_j = area[j];
          const float uni = area_i + area_j - inter;
          if (ix > 0 && iy > 0 && area_i > 0 && area_j > 0 && uni > 0 &&
              inter / uni > iou_threshold) {
            suppressed = true;
            break;
          }
        }
        if (!suppressed) kept.push_back(i);
      }
      for (long i : kept) {
        selected[rows * 3] = b, selected[rows * 3 + 1] = cl, selected[rows * 3 + 2] = i;
        ++rows;
      }
    }
  }
  return rows;
}

}  // namespace dnnf::irr
