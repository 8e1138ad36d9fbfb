// NeighborDraw: the neighbors (as edge positions) one destination draws in one hop, for every
// sampling mode (uniform or weighted, with or without replacement).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "utils/rng.h"

namespace gnnscale::sampling {

constexpr int64_t kFloydMax = 64;   // Floyd's subset sampling up to this fanout

// Draws the neighbors (as edge positions) of one destination for one hop. Scratch buffers are
// per instance, so each parallel chunk uses its own.
class NeighborDraw {
 public:
  NeighborDraw(const int64_t* indptr, const float* weights, int64_t fanout, bool replace)
      : indptr_(indptr), weights_(weights), fanout_(fanout), replace_(replace) {}

  // Number of neighbors `v` draws; sets *bad_weight when a weight is negative or NaN.
  int64_t count(int64_t v, bool* bad_weight) const {
    return count_range(indptr_[v], indptr_[v + 1], fanout_, bad_weight);
  }

  // Writes the edge positions (into `indices`) of the `c` neighbors `v` draws to `out`.
  void draw(int64_t v, int64_t c, KeyedRng& rng, int64_t* out) {
    draw_range(indptr_[v], indptr_[v + 1], fanout_, c, rng, out);
  }

  // Number of edges drawn from the positions [start, end) with `fanout` (-1: all of them);
  // sets *bad_weight when a weight is negative or NaN.
  int64_t count_range(int64_t start, int64_t end, int64_t fanout, bool* bad_weight) const {
    const int64_t deg = end - start;
    if (fanout < 0) return deg;
    int64_t avail = deg;
    if (weights_ != nullptr) {
      avail = 0;
      for (int64_t e = start; e < end; ++e) {
        const float w = weights_[e];
        if (!(w >= 0.f)) *bad_weight = true;
        avail += w > 0.f;
      }
    }
    if (replace_) return avail > 0 ? fanout : 0;
    return std::min(fanout, avail);
  }

  // Writes the `c` edge positions drawn from [start, end) with `fanout` (c: count_range's).
  void draw_range(int64_t start, int64_t end, int64_t fanout, int64_t c, KeyedRng& rng,
                  int64_t* out) {
    const int64_t deg = end - start;
    if (c == 0) return;
    if (fanout < 0) return copy_all(start, deg, out);
    if (weights_ == nullptr) {
      if (replace_) {
        for (int64_t k = 0; k < c; ++k) out[k] = start + rng.below(deg);
      } else if (c == deg) {
        copy_all(start, deg, out);
      } else if (c <= kFloydMax) {
        floyd(start, deg, c, rng, out);
      } else {
        partial_shuffle(start, deg, c, rng, out);
      }
      return;
    }
    const float* w = weights_ + start;
    if (replace_) return weighted_with_replacement(start, w, deg, c, rng, out);
    weighted_without_replacement(start, w, deg, c, rng, out);
  }

 private:
  static void copy_all(int64_t start, int64_t deg, int64_t* out) {
    for (int64_t k = 0; k < deg; ++k) out[k] = start + k;
  }

  // Floyd's algorithm: a uniform c-subset of [0, deg) in O(c^2) without scratch memory.
  static void floyd(int64_t start, int64_t deg, int64_t c, KeyedRng& rng, int64_t* out) {
    int64_t pos[kFloydMax];
    int64_t m = 0;
    for (int64_t j = deg - c; j < deg; ++j) {
      int64_t t = rng.below(j + 1);
      for (int64_t k = 0; k < m; ++k)
        if (pos[k] == t) {
          t = j;
          break;
        }
      pos[m++] = t;
    }
    for (int64_t k = 0; k < c; ++k) out[k] = start + pos[k];
  }

  // The first c steps of a Fisher-Yates shuffle of the positions.
  void partial_shuffle(int64_t start, int64_t deg, int64_t c, KeyedRng& rng, int64_t* out) {
    perm_.resize(deg);
    for (int64_t k = 0; k < deg; ++k) perm_[k] = k;
    for (int64_t k = 0; k < c; ++k) {
      std::swap(perm_[k], perm_[k + rng.below(deg - k)]);
      out[k] = start + perm_[k];
    }
  }

  // Efraimidis-Spirakis: keep the c largest keys log(u) / w (zero weights never drawn).
  void weighted_without_replacement(int64_t start, const float* w, int64_t deg, int64_t c,
                                    KeyedRng& rng, int64_t* out) {
    heap_.clear();
    const auto greater = std::greater<std::pair<double, int64_t>>();
    for (int64_t k = 0; k < deg; ++k) {
      if (!(w[k] > 0.f)) continue;
      const double key = std::log(rng.open01()) / static_cast<double>(w[k]);
      if (static_cast<int64_t>(heap_.size()) < c) {
        heap_.emplace_back(key, k);
        std::push_heap(heap_.begin(), heap_.end(), greater);
      } else if (key > heap_.front().first) {
        std::pop_heap(heap_.begin(), heap_.end(), greater);
        heap_.back() = {key, k};
        std::push_heap(heap_.begin(), heap_.end(), greater);
      }
    }
    for (int64_t k = 0; k < c; ++k) out[k] = start + heap_[k].second;
  }

  // Inverse-CDF draws: binary search of u * total in the cumulative weights.
  void weighted_with_replacement(int64_t start, const float* w, int64_t deg, int64_t c,
                                 KeyedRng& rng, int64_t* out) {
    cum_.resize(deg);
    double total = 0.0;
    for (int64_t k = 0; k < deg; ++k) cum_[k] = total += std::max(0.f, w[k]);
    for (int64_t k = 0; k < c; ++k) {
      const double x = (1.0 - rng.open01()) * total;  // in [0, total)
      int64_t p = std::upper_bound(cum_.begin(), cum_.end(), x) - cum_.begin();
      out[k] = start + std::min(p, deg - 1);
    }
  }

  const int64_t* indptr_;
  const float* weights_;
  int64_t fanout_;
  bool replace_;
  std::vector<int64_t> perm_;
  std::vector<double> cum_;
  std::vector<std::pair<double, int64_t>> heap_;
};

}  // namespace gnnscale::sampling
