// A counter-based RNG: draws keyed by (seed, hop, vertex) are the same whatever thread runs them.
#pragma once

#include <cstdint>

namespace gnnscale {

// splitmix64 finaliser: a strong 64-bit mixer (Steele et al.).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Counter-based generator: its stream is a pure function of the key it is built from, so a
// draw keyed by (seed, hop, vertex) is the same whatever thread runs it.
class KeyedRng {
 public:
  KeyedRng(uint64_t seed, uint64_t hop, uint64_t vertex)
      : state_(mix64(mix64(mix64(seed ^ 0x6A09E667F3BCC909ULL) ^ (hop + 1)) ^ vertex)) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix64(state_);
  }
  // Uniform integer in [0, n) (Lemire's multiply-shift; bias < n / 2^64).
  int64_t below(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }
  // Uniform double in (0, 1].
  double open01() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace gnnscale
