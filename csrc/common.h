// Shared pieces of the native ops: a counter-based RNG and an open-addressing id map.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

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

// Open-addressing (linear probing) map from non-negative global ids to local ids. Slots hold
// key and value side by side, so a probe touches one cache line; key -1 marks an empty slot.
class IdMap {
 public:
  explicit IdMap(int64_t expected) { rehash(capacity_for(expected)); }

  // Make room for `n` keys in total without rehashing later.
  void reserve(int64_t n) {
    if (n * 2 > static_cast<int64_t>(slots_.size())) rehash(capacity_for(n));
  }

  void prefetch(int64_t key) const { __builtin_prefetch(&slots_[slot_of(key)]); }

  // The local id of `key`, inserting `fresh` when it is absent (then *inserted = true).
  int64_t insert(int64_t key, int64_t fresh, bool* inserted) {
    uint64_t i = slot_of(key);
    while (true) {
      Slot& s = slots_[i];
      if (s.key == key) {
        *inserted = false;
        return s.value;
      }
      if (s.key == -1) {
        s.key = key;
        s.value = fresh;
        ++size_;
        *inserted = true;
        return fresh;
      }
      i = (i + 1) & mask_;
    }
  }

  int64_t size() const { return size_; }

 private:
  struct Slot {
    int64_t key;
    int64_t value;
  };

  static uint64_t capacity_for(int64_t n) {
    uint64_t cap = 16;
    while (cap < static_cast<uint64_t>(n) * 2) cap <<= 1;
    return cap;
  }
  uint64_t slot_of(int64_t key) const {
    return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift_;
  }
  void rehash(uint64_t cap) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.resize(cap);
    std::memset(static_cast<void*>(slots_.data()), 0xFF, cap * sizeof(Slot));
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
    size_ = 0;
    bool inserted;
    for (const Slot& s : old)
      if (s.key != -1) insert(s.key, s.value, &inserted);
  }

  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  int shift_ = 60;
  int64_t size_ = 0;
};

}  // namespace gnnscale
