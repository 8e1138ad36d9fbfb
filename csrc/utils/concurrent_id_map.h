// ConcurrentIdMap: the sampler's relabel map (global id -> local id).
//
// Open addressing with linear probing; a slot is [key, value] side by side (one cache line per
// probe), key -1 = empty, value kUnset until one is set. `insert` claims keys with a
// compare-and-swap, so several threads can fill the map at once (a rehash does); the relabel
// itself runs on one thread at a time and uses the plain `insert_serial`.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "utils/parallel.h"

namespace gnnscale {

class ConcurrentIdMap {
 public:
  static constexpr int64_t kUnset = INT64_MAX;  // a fresh slot's value

  // Room for `n` keys in total without rehashing during a round (rehashes in parallel).
  void reserve(int64_t n, int64_t threads) {
    if (n * 2 <= static_cast<int64_t>(cap_)) return;
    uint64_t cap = 16;
    while (cap < static_cast<uint64_t>(n) * 2) cap <<= 1;
    std::unique_ptr<int64_t[]> old(slots_.release());
    const uint64_t old_cap = cap_;
    slots_.reset(new int64_t[2 * cap]);  // left uninitialised: filled in parallel below
    cap_ = cap;
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
    constexpr int64_t kGrain = 1 << 16;
    parallel_chunks(num_chunks(cap, kGrain), threads, [&](int64_t c) {
      const uint64_t end = std::min<uint64_t>(cap, (c + 1) * kGrain);
      for (uint64_t i = c * kGrain; i < end; ++i) {
        slots_[2 * i] = -1;
        slots_[2 * i + 1] = kUnset;
      }
    });
    parallel_chunks(num_chunks(old_cap, kGrain), threads, [&](int64_t c) {
      const uint64_t end = std::min<uint64_t>(old_cap, (c + 1) * kGrain);
      for (uint64_t i = c * kGrain; i < end; ++i)
        if (old[2 * i] != -1) set_value(insert(old[2 * i]), old[2 * i + 1]);
    });
  }

  void prefetch(int64_t key) const { __builtin_prefetch(&slots_[2 * home(key)]); }

  // The slot of `key` (>= 0), claiming an empty one when it is absent.
  int64_t insert(int64_t key) {
    uint64_t i = home(key);
    while (true) {
      std::atomic_ref<int64_t> k(slots_[2 * i]);
      int64_t seen = k.load(std::memory_order_acquire);
      if (seen == -1 && k.compare_exchange_strong(seen, key, std::memory_order_acq_rel))
        return static_cast<int64_t>(i);
      if (seen == key) return static_cast<int64_t>(i);
      i = (i + 1) & mask_;
    }
  }

  // Single-threaded relabel: the local id of `key`, inserting `fresh` when it is absent (then
  // *inserted = true). Plain loads and stores; no other thread may use the map meanwhile.
  int64_t insert_serial(int64_t key, int64_t fresh, bool* inserted) {
    uint64_t i = home(key);
    while (true) {
      int64_t* s = &slots_[2 * i];
      if (s[0] == key) {
        *inserted = false;
        return s[1];
      }
      if (s[0] == -1) {
        s[0] = key;
        s[1] = fresh;
        *inserted = true;
        return fresh;
      }
      i = (i + 1) & mask_;
    }
  }

  int64_t key(int64_t slot) const { return slots_[2 * slot]; }

  int64_t value(int64_t slot) const {
    return std::atomic_ref<int64_t>(slots_[2 * slot + 1]).load(std::memory_order_relaxed);
  }

  void set_value(int64_t slot, int64_t v) {
    std::atomic_ref<int64_t>(slots_[2 * slot + 1]).store(v, std::memory_order_relaxed);
  }

  int64_t size() const { return size_; }
  void grow_size(int64_t added) { size_ += added; }

 private:
  uint64_t home(int64_t key) const {
    return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift_;
  }

  std::unique_ptr<int64_t[]> slots_;
  uint64_t cap_ = 0;
  uint64_t mask_ = 0;
  int shift_ = 64;
  int64_t size_ = 0;
};

}  // namespace gnnscale
