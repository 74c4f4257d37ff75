#pragma once
/// \file
/// Grouping nodes into racks from a matrix of measured bandwidths: a pure
/// function, so the probe's decision is testable without MPI (the probe in
/// `mpi/detect.hpp` measures the matrix and calls this).
///
/// The largest ratio between consecutive sorted pair bandwidths is the gap
/// between fast (same rack) and slow (across racks) links; its geometric
/// middle is the threshold. Nodes joined by fast pairs form groups. The
/// split is used only when it is clean: the gap is at least `gap_ratio`,
/// there are at least two groups of equal size, and every pair inside a
/// group is fast and every pair across groups slow. Otherwise all nodes are
/// one group (one network level).
///
/// And the plausibility check every probed link passes before it is used
/// (`implausible_link`), also pure.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "ddl/core/error.hpp"

namespace ddl {

/// What `group_by_bandwidth_gap` found.
struct bandwidth_groups {
  int groups = 1;            ///< 1 when no clean split was found
  std::vector<int> group;    ///< group of each node, numbered by first node
  double gap = 1;            ///< largest ratio between consecutive pair bandwidths
  double threshold = 0;      ///< pairs at or above it count as fast
  bool clean = false;        ///< the split was used
  std::string why;           ///< why not, when not
};

/// \param bw `n x n` row-major bandwidths (bytes/s) between node pairs; the
///        upper triangle is read (i < j), the diagonal ignored.
/// \param gap_ratio the smallest gap that counts as a hierarchy (e.g. 1.5).
inline bandwidth_groups group_by_bandwidth_gap(const std::vector<double>& bw, int n, double gap_ratio) {
  if (n < 1 || bw.size() != static_cast<std::size_t>(n) * static_cast<std::size_t>(n))
    throw invalid_argument("group_by_bandwidth_gap: " + std::to_string(bw.size()) + " bandwidths for " +
                           std::to_string(n) + " nodes (want n*n)");
  const std::size_t N = static_cast<std::size_t>(n);
  bandwidth_groups g;
  g.group.assign(N, 0);
  std::vector<double> all;
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j) all.push_back(bw[i * N + j]);
  std::sort(all.begin(), all.end());
  for (std::size_t k = 1; k < all.size(); ++k)
    if (all[k - 1] > 0 && all[k] / all[k - 1] > g.gap) {
      g.gap = all[k] / all[k - 1];
      g.threshold = std::sqrt(all[k] * all[k - 1]);
    }
  if (!(g.gap >= gap_ratio)) {
    g.why = "no bandwidth gap of " + std::to_string(gap_ratio) + "x or more";
    return g;
  }
  auto fast = [&](std::size_t i, std::size_t j) { return bw[std::min(i, j) * N + std::max(i, j)] >= g.threshold; };
  // Connected groups over fast pairs, numbered by their first node.
  std::vector<int> group(N, -1);
  int groups = 0;
  for (std::size_t i = 0; i < N; ++i) {
    if (group[i] >= 0) continue;
    for (std::size_t j = i; j < N; ++j)
      if (j == i || fast(i, j)) group[j] = groups;
    ++groups;
  }
  std::vector<int> count(static_cast<std::size_t>(groups), 0);
  for (std::size_t i = 0; i < N; ++i) ++count[static_cast<std::size_t>(group[i])];
  bool consistent = true;
  for (std::size_t i = 0; i < N && consistent; ++i)
    for (std::size_t j = 0; j < N && consistent; ++j)
      if (i != j && (group[i] == group[j]) != fast(i, j)) consistent = false;
  const bool equal = std::all_of(count.begin(), count.end(), [&](int c) { return c == count[0]; });
  if (groups == 1 || !consistent || !equal) {
    g.why = "bandwidths do not split into equal, consistent groups";
    return g;
  }
  g.groups = groups;
  g.group = std::move(group);
  g.clean = true;
  return g;
}

/// Bounds a measured link must fall in, measured on the probing rank: no
/// latency shorter than the probe can time, and no link moving bytes faster
/// than the machine's memory does.
struct link_bounds {
  double min_latency = 0;    ///< seconds (a few reads of the clock)
  double max_bandwidth = 0;  ///< bytes/s (memory traffic of a local copy)
};

/// Why a probed (latency, bandwidth) cannot be a link's, or "" when it can:
/// a bandwidth that is not positive (not measured) or above the memory's,
/// or a latency below the bound. The probe falls back to stated defaults
/// on a non-empty answer (and logs it).
inline std::string implausible_link(double latency, double bandwidth, const link_bounds& b) {
  char text[160];
  if (!(bandwidth > 0)) return "bandwidth not measured (large messages no slower than 1-byte ones)";
  if (b.max_bandwidth > 0 && bandwidth > b.max_bandwidth) {
    std::snprintf(text, sizeof text, "bandwidth %.3g GB/s above this machine's memory bandwidth (%.3g GB/s)",
                  bandwidth / 1e9, b.max_bandwidth / 1e9);
    return text;
  }
  if (!(latency >= b.min_latency) || !(latency > 0)) {
    std::snprintf(text, sizeof text, "latency %.3g us below what the probe can time (%.3g us)", latency * 1e6,
                  b.min_latency * 1e6);
    return text;
  }
  return "";
}

}  // namespace ddl
