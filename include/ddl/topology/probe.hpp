#pragma once
/// \file
/// What topology detection measures over any process transport (MPI, UCX):
/// round trips, one-way and two-way streams as the step engine sends them,
/// every pair of node leaders, and how many links a unit (a node, a rack)
/// has under load. Only the transport's isend/irecv/wait are used (the few
/// figures every rank must share travel through `share`, a gather at rank 0
/// and back), so one prober serves every transport. Every wait has a
/// deadline; bystanders wait in a barrier that sleeps rather than spins (on
/// oversubscribed cores they would steal the probing pair's CPU). What the
/// figures mean and how they become a topology is `topology/detect.hpp`'s
/// business; the checks and clustering are pure (`topology/cluster.hpp`).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddl/topology/cluster.hpp"

namespace ddl::detail {

/// Latency (s) and bandwidth (bytes/s) of one link; bandwidth 0: not measured.
struct link_cost {
  double latency = 0, bandwidth = 0;
};

/// Every pair of nodes (N x N, symmetric, zero diagonal), on every rank.
struct pair_matrices {
  std::vector<double> one_way;   ///< bytes/s, as the receiver saw it
  std::vector<double> exchange;  ///< bytes/s each way, both ways streaming
  std::vector<double> latency;   ///< s
};

/// A unit's links, and what exchanging costs under the collective's load.
/// One exchange alone, then k at once out of the same unit (the same method
/// back to back, so drift cancels): if the k take as long as one alone the
/// unit has k links, if k times as long, 1. Then the k flows one way at once:
/// exchanging / one way, both under that load, is the factor the level's
/// exchange bandwidth gets (a pair probed alone can hide the penalty a loaded
/// unit pays, e.g. with many messages in flight).
struct unit_probe {
  int links = 0;
  double factor = 0;                 ///< exchange / one way, per flow, k flows at once; 0: not measured
  double exchange = 0, one_way = 0;  ///< per flow, k flows at once
};

/// The median (upper for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Probes over a transport `T` of the Transport concept.
template <class T>
class prober {
 public:
  explicit prober(T* t = nullptr) : t_(t) {}
  /// Probes over `t` from now on (after ranks were renumbered).
  void retarget(T& t) noexcept { t_ = &t; }

  /// Every rank's `bytes` from `mine`, in rank order, on every rank (a
  /// gather at rank 0, then rank 0 sends the whole to each): for the few
  /// figures detection shares, never for data. Collective.
  std::vector<std::byte> share(const void* mine, std::size_t bytes) {
    auto& t = *t_;
    const int n = t.size();
    std::vector<std::byte> all(bytes * static_cast<std::size_t>(n));
    std::memcpy(all.data() + bytes * static_cast<std::size_t>(t.rank()), mine, bytes);
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    if (t.rank() == 0) {
      for (int q = 1; q < n; ++q) {
        auto r = t.irecv(q, {all.data() + bytes * static_cast<std::size_t>(q), bytes}, 13);
        t.wait(r, limit);
      }
      for (int q = 1; q < n; ++q) {
        auto r = t.isend(q, {all.data(), all.size()}, 14);
        t.wait(r, limit);
      }
    } else {
      auto s = t.isend(0, {static_cast<const std::byte*>(mine), bytes}, 13);
      t.wait(s, limit);
      auto r = t.irecv(0, {all.data(), all.size()}, 14);
      t.wait(r, limit);
    }
    return all;
  }
  /// `v` combined element-wise over every rank (`sum`, or the largest). Collective.
  void combine(std::vector<double>& v, bool sum) {
    const std::vector<std::byte> all = share(v.data(), v.size() * sizeof(double));
    std::vector<double> row(v.size());
    for (int q = 0; q < t_->size(); ++q) {
      std::memcpy(row.data(), all.data() + static_cast<std::size_t>(q) * v.size() * sizeof(double), v.size() * sizeof(double));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = q == 0 ? row[i] : sum ? v[i] + row[i] : std::max(v[i], row[i]);
    }
  }
  /// Rank 0's `n` doubles at `v`, on every rank. Collective.
  void from_rank0(double* v, std::size_t n) {
    const std::vector<std::byte> all = share(v, n * sizeof(double));
    std::memcpy(v, all.data(), n * sizeof(double));
  }

  // Round trips between ranks a and b (others return at once): half the
  // fastest 1-byte round trip, and bytes/s from the fastest big ones less
  // it (bandwidth 0 when the big ones were no slower: not measured). The
  // fastest, not the mean: on oversubscribed cores a round trip that waited
  // for the partner to be scheduled measures the scheduler, not the link.
  link_cost pingpong(int a, int b, std::size_t big, int reps) {
    auto& t = *t_;
    if (t.rank() != a && t.rank() != b) return {};
    const int other = t.rank() == a ? b : a;
    if (probe_buf_size_ < big) {
      probe_buf_.reset(new std::byte[big]());
      probe_buf_size_ = big;
    }
    const auto limit = std::chrono::seconds(120);
    auto fastest = [&](std::size_t bytes, int n) {
      double best = 1e300;
      for (int i = 0; i < n; ++i) {
        const auto start = std::chrono::steady_clock::now();
        for (int leg = 0; leg < 2; ++leg) {
          const bool send = (leg == 0) == (t.rank() == a);
          auto r = send ? t.isend(other, {probe_buf_.get(), bytes}, 7) : t.irecv(other, {probe_buf_.get(), bytes}, 7);
          t.wait(r, std::chrono::steady_clock::now() + limit);
        }
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return best;
    };
    fastest(1, 3);
    const double rtt = fastest(1, 20);
    fastest(big, 1);
    const double rtt_big = fastest(big, reps);
    return {rtt / 2, rtt_big > rtt ? 2.0 * static_cast<double>(big) / (rtt_big - rtt) : 0.0};
  }

  // `link_bounds` (topology/cluster.hpp), measured on this rank: four reads
  // of the clock (no shorter time can be measured; a round trip reads it
  // twice and does more between), and twice the rate of its fastest copy of
  // the probe buffer (one read and one write per byte).
  link_bounds bounds() {
    if (bounds_.max_bandwidth > 0) return bounds_;
    const std::size_t big = std::max<std::size_t>(probe_buf_size_ / 2, 1 << 20);
    if (probe_buf_size_ < 2 * big) {
      probe_buf_.reset(new std::byte[2 * big]());
      probe_buf_size_ = 2 * big;
    }
    double copy = 1e300, tick = 1e300;
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(probe_buf_.get() + big, probe_buf_.get(), big);
      copy = std::min(copy, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    for (int i = 0; i < 100; ++i) {
      const auto a = std::chrono::steady_clock::now();
      const auto b = std::chrono::steady_clock::now();
      tick = std::min(tick, std::chrono::duration<double>(b - a).count());
    }
    bounds_ = {4 * std::max(tick, 1e-9), 2.0 * static_cast<double>(big) / std::max(copy, 1e-9)};
    return bounds_;
  }

  // `c` if `implausible_link` finds nothing wrong with it, else `fallback`,
  // with a line in `log` saying what was wrong and what is used instead.
  link_cost sane(link_cost c, link_cost fallback, const char* where, std::string& log) {
    const std::string why = implausible_link(c.latency, c.bandwidth, bounds());
    if (why.empty()) return c;
    char text[320];
    std::snprintf(text, sizeof text, "; %s: probe unusable (%s): defaults %.3g GB/s, %.3g us used", where, why.c_str(),
                  fallback.bandwidth / 1e9, fallback.latency * 1e6);
    log += text;
    return fallback;
  }

  // Bytes/s from a to b (and from b to a too, when `both`: each way while
  // both directions stream) for `reps` messages of `big`, at most `depth` in
  // flight each way, as the step engine sends. On some networks a direction
  // slows when the other is busy (a connection's acknowledgements and
  // handshakes queue behind its own data): exchanges and one-way streams are
  // priced apart. `rtt` is subtracted.
  double stream_rate(int a, int b, std::size_t big, int reps, bool both, double rtt, int depth) {
    auto& t = *t_;
    if (t.rank() != a && t.rank() != b) return 0;
    const int other = t.rank() == a ? b : a;
    const bool sends = both || t.rank() == a, recvs = both || t.rank() == b;
    const std::size_t need = 2 * big * static_cast<std::size_t>(depth);
    if (probe_buf_size_ < need) {
      probe_buf_.reset(new std::byte[need]());
      probe_buf_size_ = need;
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    auto once = [&](int n) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<typename T::request> rq, sq;
      for (int i = 0; i < n; ++i) {
        const std::size_t slot = static_cast<std::size_t>(i % depth) * big;
        if (recvs) {
          if (static_cast<int>(rq.size()) == depth) {
            t.wait(rq.front(), limit);
            rq.erase(rq.begin());
          }
          rq.push_back(t.irecv(other, {probe_buf_.get() + slot, big}, 8));
        }
        if (sends) {
          if (static_cast<int>(sq.size()) == depth) {
            t.wait(sq.front(), limit);
            sq.erase(sq.begin());
          }
          sq.push_back(t.isend(other, {probe_buf_.get() + static_cast<std::size_t>(depth) * big + slot, big}, 8));
        }
      }
      for (auto& r : rq) t.wait(r, limit);
      for (auto& r : sq) t.wait(r, limit);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    once(1);  // warm-up
    const double dt = once(reps);
    return static_cast<double>(reps) * static_cast<double>(big) / std::max(dt - rtt, 1e-9);
  }

  // The time of one step of a collective inside a node, as the collective
  // runs it: every rank of every node exchanging `bytes` with a partner of
  // its node at once, `reps` steps back to back, the partner changing each
  // step as in recursive doubling (local rank xor 1, 2, 4, ...; one without
  // a partner that step waits). A pair probed alone times the link; this
  // times the step, with every rank of the node wanting a core
  // (oversubscribed ranks wait for their partner to be scheduled once per
  // step). The median of 5 batches of each rank, then the slowest rank's:
  // a step ends when its last pair has. Collective over the transport's
  // communicator; node-major ranks, `ppn` per node.
  double loaded_step(int ppn, std::size_t bytes, int reps) {
    auto& t = *t_;
    const int local = t.rank() % ppn;
    int masks = 0;
    while ((2 << masks) <= ppn) ++masks;  // floor(log2(ppn))
    auto partner = [&](int i) {
      const int mate = local ^ (1 << (i % std::max(masks, 1)));
      return mate < ppn ? t.rank() - local + mate : -1;
    };
    if (probe_buf_size_ < 2 * bytes) {
      probe_buf_.reset(new std::byte[2 * bytes]());
      probe_buf_size_ = 2 * bytes;
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    std::vector<double> batches;
    for (int b = 0; b < 6; ++b) {
      quiet_barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        const int p = partner(i);
        if (p < 0) continue;
        auto r = t.irecv(p, {probe_buf_.get(), bytes}, 12);
        auto s = t.isend(p, {probe_buf_.get() + bytes, bytes}, 12);
        t.wait(r, limit);
        t.wait(s, limit);
      }
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (b > 0) batches.push_back(dt / reps);  // the first one warms up
    }
    std::vector<double> step{median(batches)};
    combine(step, false);
    return step[0];
  }

  // A node's link cost as its collectives see it: `loaded_step` of 1 byte
  // (the latency) and of `big` bytes (the bandwidth, the 1-byte step less).
  // Collective.
  link_cost node_step_cost(int ppn, std::size_t big) {
    const double small = loaded_step(ppn, 1, 64), large = loaded_step(ppn, big, 4);
    return {small, large > small ? static_cast<double>(big) / (large - small) : 0.0};
  }

  // A barrier whose waiting ranks sleep (the transport's back-off) instead
  // of spinning (as MPICH's MPI_Barrier does): on oversubscribed cores,
  // spinning bystanders would steal the CPU the probing pair needs.
  void quiet_barrier() {
    auto& t = *t_;
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    std::byte token{};
    if (t.rank() == 0) {
      for (int q = 1; q < t.size(); ++q) {
        auto r = t.irecv(q, {&token, 0}, 10);
        t.wait(r, limit);
      }
      for (int q = 1; q < t.size(); ++q) {
        auto r = t.isend(q, {&token, 0}, 11);
        t.wait(r, limit);
      }
    } else {
      auto s = t.isend(0, {&token, 0}, 10);
      t.wait(s, limit);
      auto r = t.irecv(0, {&token, 0}, 11);
      t.wait(r, limit);
    }
  }

  // Latency, one-way and exchange bandwidth of every pair of node leaders
  // (rank k * ppn leads node k), one pair at a time, the others waiting.
  pair_matrices measure_pairs(int nodes, int ppn, std::size_t probe_bytes, int depth) {
    auto& t = *t_;
    const auto N = static_cast<std::size_t>(nodes);
    pair_matrices pm{std::vector<double>(N * N, 0.0), std::vector<double>(N * N, 0.0), std::vector<double>(N * N, 0.0)};
    for (int i = 0; i < nodes; ++i)
      for (int j = i + 1; j < nodes; ++j) {
        const int a = i * ppn, b = j * ppn;
        const link_cost c = pingpong(a, b, 1, 1);  // latency (the 1-byte round trips)
        const double one_way = stream_rate(a, b, probe_bytes, 8, false, c.latency, depth);
        const double both = stream_rate(a, b, probe_bytes, 8, true, 2 * c.latency, depth);
        if (t.rank() == a) {
          pm.exchange[i * N + j] = pm.exchange[j * N + i] = both;
          pm.latency[i * N + j] = pm.latency[j * N + i] = c.latency;
        }
        if (t.rank() == b) pm.one_way[i * N + j] = pm.one_way[j * N + i] = one_way;
        quiet_barrier();
      }
    for (auto* m : {&pm.one_way, &pm.exchange, &pm.latency}) combine(*m, true);
    return pm;
  }

  // Each figure is the flows' bytes over the wall time from a common start
  // until the last flow ends (timed on rank 0 between two barriers, less
  // the barriers' own time): flows that start or finish apart would each
  // report more than their share.
  unit_probe probe_unit(const std::vector<std::pair<int, int>>& pairs, std::size_t probe_bytes, int depth) {
    unit_probe u;
    if (pairs.size() < 2) return u;
    const int me = t_->rank();
    // At least 8 MiB per flow, so the flows outlast the barriers' noise
    // (a waiting rank sleeps in steps of up to 200 us).
    const std::size_t per_flow = std::size_t{8} << 20;
    const int reps = static_cast<int>(std::max<std::size_t>(8, (per_flow + probe_bytes - 1) / probe_bytes));
    auto wall = [&](std::size_t flows, bool both) {
      quiet_barrier();
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t f = 0; f < flows; ++f)
        if (me == pairs[f].first || me == pairs[f].second)
          stream_rate(pairs[f].first, pairs[f].second, probe_bytes, reps, both, 0, depth);
      quiet_barrier();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // Each figure is the fastest of three (a slow one waited for the
    // scheduler, not the links), less the two barriers alone (they matter
    // on fast links).
    auto fastest = [&](std::size_t flows, bool both) {
      double best = 1e300;
      for (int i = 0; i < 3; ++i) best = std::min(best, wall(flows, both));
      return best;
    };
    const double idle = fastest(0, true);
    double secs[3] = {fastest(1, true) - idle, fastest(pairs.size(), true) - idle, fastest(pairs.size(), false) - idle};
    from_rank0(secs, 3);
    // stream_rate sends one warm-up message before its timed ones.
    const double bytes = static_cast<double>(reps + 1) * static_cast<double>(probe_bytes);
    const int k = static_cast<int>(pairs.size());
    if (!(secs[0] > 0 && secs[1] > 0 && secs[2] > 0)) return u;
    u.exchange = bytes / secs[1];  // per flow, each way
    u.one_way = bytes / secs[2];
    u.links = std::max(1, std::min(k, static_cast<int>(std::lround(k * secs[0] / secs[1]))));
    u.factor = std::min(1.0, secs[2] / secs[1]);
    return u;
  }

  /// One line for the log: what `probe_unit` found for `flows` flows.
  static std::string describe(const unit_probe& u, std::size_t flows) {
    if (!(u.factor > 0))
      return "; " + std::to_string(flows) + " flows at once: not measured (no longer than the barriers around them)";
    char text[160];
    std::snprintf(text, sizeof text, "; %zu flows at once: %.1f MB/s each one way, %.1f exchanging (x%.2f)", flows,
                  u.one_way / 1e6, u.exchange / 1e6, u.factor);
    return std::string(text);
  }

 private:
  T* t_;
  std::unique_ptr<std::byte[]> probe_buf_;
  std::size_t probe_buf_size_ = 0;
  link_bounds bounds_;
};

}  // namespace ddl::detail
