// An open-addressing map from non-negative global ids to local ids (the sampler's relabel).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace gnnscale {

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
