// NeutronStar's greedy step (Algorithm 4, lines 8-15), shared by every planner that replicates
// dependencies: fullgraph's hybrid_greedy (csrc/deps/cpu/) and split's per-sample split
// (csrc/split/cpu/). Candidates are walked cheapest first (ties by position); a candidate that
// is not worth replicating is skipped, and the first worthwhile one that does not fit the
// budget ends the pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace gnnscale::deps {

// (recomputation cost, candidate) pairs, sorted by greedy_walk.
using Candidates = std::vector<std::pair<double, int64_t>>;

// Walks `cand` in ascending (cost, candidate) order: skips u unless worth(u), stops at the
// first worthwhile u with !fits(u), else calls take(u). `worth` may re-measure u (lazily, after
// earlier takes); `fits` and `take` keep the caller's running budget.
template <class Worth, class Fits, class Take>
void greedy_walk(Candidates& cand, Worth&& worth, Fits&& fits, Take&& take) {
  std::sort(cand.begin(), cand.end());
  for (const auto& entry : cand) {
    const int64_t u = entry.second;
    if (!worth(u)) continue;
    if (!fits(u)) break;
    take(u);
  }
}

}  // namespace gnnscale::deps
