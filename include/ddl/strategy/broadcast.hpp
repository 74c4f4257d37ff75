#pragma once
/// \file
/// Broadcast and barrier over any transport, in the step vocabulary of
/// `step.hpp`. They need no reduction, so every strategy shares them; the
/// communicator picks the broadcast algorithm from the transport's link
/// costs (`broadcast_choice`).
///
/// Broadcast algorithms, for S bytes over n ranks, per-step latency a and
/// per-flow bandwidth B; steps that copy what they receive run at c B, c the
/// transport's `copy_step_factor` (threads 1.5, else 1; written B below):
///   - binomial tree: ceil(log2 n) rounds, each forwarding the whole message;
///       t = ceil(log2 n) (a + S / B)            -- least latency, small S
///   - pipelined chain: the message cut into k segments flowing down the
///     chain root -> root+1 -> ... ; segment s leaves rank i while s+1
///     arrives, so after the chain fills every link is busy:
///       t = (k + n - 2) (a + S / (k B)),  best k = sqrt((n - 2) S / (a B))
///                                               -- ~S / B for large S
///   - scatter + all-gather (van de Geijn): the message cut into n blocks; a
///     binomial scatter gives every rank its block (ceil(log2 n) rounds),
///     then an all-gather gives every rank every block (recursive doubling,
///     log2 n rounds, when n is a power of two; else a ring, n - 1):
///       t = (ceil(log2 n) + g) a + 2 S (n - 1) / (n B),  g = log2 n or n - 1
///                                               -- few steps, for large S
///     twice the chain's bytes per link but a handful of hand-offs where the
///     chain has k + n - 2: where a hand-off costs more than the model's a
///     (ranks sharing cores wait to be scheduled at each), it is the safer one.
///   - direct, through the stages (ranks that share them and can wait on
///     them: threads, MPI ranks of one machine; `broadcast_costs`), no
///     message: ranks of several processes take the message in pieces of
///     P = `direct_base::flagged_limit` bytes, each one meeting through
///     counters; the root copies a piece into its stage, every other rank
///     copies it out, at the memory's rate M (f: a meeting in latencies):
///       t = ceil(S / P) f a + 2 S / M
///     up to R = `direct_base::ring_limit` bytes through the root's ring
///     instead: the readers wait for one store of the root's, the root for
///     nobody, half a meeting (back to back, about half the tree's one
///     message):
///       t = f a / 2 + 2 S / M                   -- S <= R
///     ranks of one process (`in_place`) copy a message of more than one
///     piece from the root's buffer where it lies, between two meetings:
///       t = 2 f a + S / M                       -- a meeting or two where a
///                                                  tree has log2 n hand-offs
///     and two ranks (threads, or MPI ranks that copy to and from each
///     other's memory: `halves`) past R, each half of it at once:
///       t = 2 f a + S / (2 M)
/// `DDL_BROADCAST` (or `options::broadcast`) forces one; `auto` takes the
/// cheapest by these formulas, with a and B those of the topology's slowest
/// level (a tree over several levels crosses each of them, and its pipeline
/// runs at the pace of the slowest): the strategy's topology where it has
/// one (`auto_strategy`: `DDL_TOPOLOGY`, `DDL_PROBE=1`, an `mpi_cluster`'s
/// probe), else the transport's, else its default link costs.
/// Barrier: dissemination, ceil(log2 n) rounds; in round j rank r signals
/// r + 2^j and hears from r - 2^j, so after the last round every rank has
/// heard, transitively, from every other.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "ddl/core/config.hpp"
#include "ddl/strategy/direct.hpp"
#include "ddl/strategy/planner.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/topology/topology.hpp"

namespace ddl {

/// How a broadcast of a given size is carried out.
struct broadcast_plan {
  using algorithm = broadcast_algorithm;
  algorithm algo = algorithm::binomial;
  std::size_t segments = 1;  ///< chain, direct: how many pieces the message is cut into
  double seconds = 0;        ///< predicted time
  /// One line: the algorithm and its shape.
  std::string describe() const {
    switch (algo) {
      case algorithm::chain: return "chain of " + std::to_string(segments) + " segments";
      case algorithm::scatter_allgather: return "scatter + all-gather";
      case algorithm::direct:  // one piece, or the root's buffer read in place
        return segments == 1 ? "direct" : "direct in " + std::to_string(segments) + " pieces";
      default: return "binomial tree";
    }
  }
};

/// What a transport's broadcast steps cost besides its links' a and B
/// (`broadcast_costs_of`, below): `copy` a copying step's rate as a multiple
/// of B (`plan_for::copy_step`); whether its ranks may broadcast through
/// their stages (`direct`, `broadcast_algorithm::direct`), and there `read`
/// the memory's rate as a multiple of B (`plan_for::direct_read` over MPI),
/// `flagged` a meeting through counters in latencies
/// (`plan_for::flagged_latency`), `in_place` whether they read the root's
/// buffer where it lies (threads: `peer_memory`), `halves` whether two
/// ranks split that copy (threads; processes with `read_peer` and
/// `write_peer`: `direct_base::halves`).
struct broadcast_costs {
  double copy = 1.0;
  bool direct = false;
  double read = 2.0;
  double flagged = 1.0;
  bool in_place = false;
  bool halves = false;
};

/// `t`'s `broadcast_costs`; `host`: the call's buffers are host memory
/// (the stages hold nothing else).
template <class T>
broadcast_costs broadcast_costs_of(const T& t, bool host = true) {
  const plan_for q = plan_for::transport(t);
  broadcast_costs b;
  b.copy = q.copy_step;
  if constexpr (has_wait_until_v<T>) {
    b.direct = host && q.peer_memory;
    b.flagged = q.flagged_latency;
    // Ranks of one process read the root's buffer as their messages copy
    // (at `copy` B; `direct_read` prices two_shot's many streams at once);
    // over MPI the stages copy at memory speed where messages do not.
    b.in_place = has_peer_memory_v<T>;
    b.halves = detail::direct_base::halves(t);
    b.read = b.in_place ? q.copy_step : q.direct_read;
  } else {
    (void)host;
  }
  return b;
}

/// ceil(log2 n) for n >= 1.
constexpr int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

/// The cheapest broadcast for `bytes` over `ranks` by the formulas above,
/// or the one `force` names (anything but `automatic`), priced the same way;
/// `direct` among them where `costs.direct`.
/// \param elem_size segments and blocks are whole elements of this size.
inline broadcast_plan broadcast_choice(std::size_t bytes, int ranks, double latency, double link_bandwidth,
                                       std::size_t elem_size = 1,
                                       broadcast_algorithm force = broadcast_algorithm::automatic,
                                       const broadcast_costs& costs = {}) {
  using algo = broadcast_algorithm;
  const double S = static_cast<double>(bytes), n = ranks, bandwidth = costs.copy * link_bandwidth;
  const std::size_t elems = bytes / std::max<std::size_t>(elem_size, 1);
  broadcast_plan binomial;
  binomial.seconds = ceil_log2(ranks) * (latency + S / bandwidth);
  broadcast_plan chain;
  chain.algo = algo::chain;
  const double best_k = ranks > 2 ? std::sqrt((n - 2) * S / (latency * bandwidth)) : 1.0;
  chain.segments = static_cast<std::size_t>(std::clamp(best_k, 1.0, 1024.0));
  chain.segments = std::max<std::size_t>(1, std::min(chain.segments, elems));
  chain.seconds = (static_cast<double>(chain.segments) + n - 2) * (latency + S / (static_cast<double>(chain.segments) * bandwidth));
  broadcast_plan sag;
  sag.algo = algo::scatter_allgather;
  const bool pow2 = (ranks & (ranks - 1)) == 0;
  sag.seconds = (ceil_log2(ranks) + (pow2 ? ceil_log2(ranks) : ranks - 1)) * latency +
                2 * S * (n - 1) / (n * bandwidth);
  broadcast_plan direct;
  direct.algo = algo::direct;
  constexpr std::size_t piece = detail::direct_base::flagged_limit;
  constexpr std::size_t ring_limit = detail::direct_base::ring_limit;
  const bool ring = bytes <= ring_limit;
  const bool halves = costs.halves && !ring;
  const bool whole = halves || (costs.in_place && bytes > piece);
  const double memory = costs.read * link_bandwidth;
  direct.segments = whole ? 1 : std::max<std::size_t>(1, (bytes + piece - 1) / piece);
  direct.seconds = whole ? 2 * costs.flagged * latency + S / (halves ? 2 * memory : memory)
                   : ring ? costs.flagged * latency / 2 + 2 * S / memory
                          : static_cast<double>(direct.segments) * costs.flagged * latency + 2 * S / memory;
  switch (force) {
    case algo::binomial: return binomial;
    case algo::chain: return chain;
    case algo::scatter_allgather: return sag;
    case algo::direct: return direct;
    default: break;
  }
  if (bytes == 0) return binomial;
  broadcast_plan best = binomial;
  if (ranks > 2) {
    if (chain.seconds < best.seconds) best = chain;
    // The blocks must hold an element each, or the scatter sends nothing useful.
    if (elems >= static_cast<std::size_t>(ranks) && sag.seconds < best.seconds) best = sag;
  }
  if (costs.direct && direct.seconds < best.seconds) best = direct;
  return best;
}

/// The same over `topo`'s ranks, priced at its slowest level: the largest
/// latency and the least bandwidth of the levels that join more than one
/// group (`level::bandwidth`, one flow per link).
inline broadcast_plan broadcast_choice(std::size_t bytes, const topology& topo, std::size_t elem_size = 1,
                                       broadcast_algorithm force = broadcast_algorithm::automatic,
                                       const broadcast_costs& costs = {}) {
  double latency = 0, bandwidth = 0;
  for (std::size_t l = 0; l < topo.count(); ++l) {
    if (topo[l].extent < 2) continue;
    latency = std::max(latency, topo[l].latency);
    bandwidth = bandwidth == 0 ? topo[l].bandwidth : std::min(bandwidth, topo[l].bandwidth);
  }
  if (bandwidth == 0) return broadcast_choice(bytes, topo.size(), 0, 1, elem_size, force);  // one rank: nothing moves
  return broadcast_choice(bytes, topo.size(), latency, bandwidth, elem_size, force, costs);
}

namespace detail {

/// Binomial-tree broadcast of `bytes` at `data` from `root`. With relative
/// rank v = (rank - root) mod n, in round j the ranks v < 2^j (which hold the
/// data) send to v + 2^j.
template <class Transport>
void binomial_broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, const call_context& c, tag tg) {
  const int n = t.size(), v = (t.rank() - root + n) % n, rounds = ceil_log2(n);
  int round = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++round) {
    step_desc d;
    if (v < mask && v + mask < n) {
      d.send_peer = (v + mask + root) % n;
      d.send = data;
      d.send_bytes = bytes;
    } else if (v >= mask && v < 2 * mask) {
      d.recv_peer = (v - mask + root) % n;
      d.recv = data;
      d.recv_bytes = bytes;
    } else {
      continue;
    }
    run_step(t, d, c, tg, phase_name{"binomial broadcast", round, rounds});
  }
}

/// Pipelined-chain broadcast in `segments` pieces (whole elements of
/// `elem_size`). Step s: receive segment s from the left while sending
/// segment s - 1 to the right, so the segments stream down the chain.
template <class Transport>
void chain_broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, std::size_t segments,
                     std::size_t elem_size, const call_context& c, tag tg) {
  const int n = t.size(), v = (t.rank() - root + n) % n;
  const std::size_t elems = bytes / elem_size;
  segments = std::max<std::size_t>(1, std::min(segments, elems));
  auto seg = [&](std::size_t s) {  // byte range of segment s
    const std::size_t lo = elems * s / segments, hi = elems * (s + 1) / segments;
    return std::pair<std::size_t, std::size_t>(lo * elem_size, (hi - lo) * elem_size);
  };
  const int left = v > 0 ? (v - 1 + root) % n : -1;
  const int right = v + 1 < n ? (v + 1 + root) % n : -1;
  const int steps = static_cast<int>(segments) + 1;
  for (std::size_t s = 0; s <= segments; ++s) {
    step_desc d;
    if (right >= 0) {
      // The root has every segment at once; the others forward the one they
      // received the step before.
      const std::size_t out = v == 0 ? s : s - 1;
      if ((v == 0 && s < segments) || (v > 0 && s >= 1)) {
        auto [off, len] = seg(out);
        d.send_peer = right;
        d.send = data + off;
        d.send_bytes = len;
      }
    }
    if (left >= 0 && s < segments) {
      auto [off, len] = seg(s);
      d.recv_peer = left;
      d.recv = data + off;
      d.recv_bytes = len;
    }
    if (d.send_peer < 0 && d.recv_peer < 0) continue;
    run_step(t, d, c, tg, phase_name{"chain broadcast", static_cast<int>(s), steps});
  }
}

/// Scatter + all-gather broadcast. Block i (whole elements, the partition of
/// `partition.hpp`'s rule: elems * i / n) belongs to relative rank i. The
/// scatter: at mask m, from the top, a rank v with v % 2m == 0 holds blocks
/// [v, v + 2m) and hands [v + m, v + 2m) to v + m. The all-gather: with n a
/// power of two, v and v ^ m swap their aligned groups of m blocks (m = 1,
/// 2, 4, ...); else a ring, rank v passing block v - s to v + 1 at step s.
template <class Transport>
void scatter_allgather_broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, std::size_t elem_size,
                                 const call_context& c, tag tg) {
  const int n = t.size(), v = (t.rank() - root + n) % n, rounds = ceil_log2(n);
  const bool pow2 = (n & (n - 1)) == 0;
  const int steps = rounds + (pow2 ? rounds : n - 1);
  const std::size_t elems = bytes / elem_size;
  auto at = [&](int i) {  // byte offset of block i, i in [0, n]
    return elems * static_cast<std::size_t>(std::min(i, n)) / static_cast<std::size_t>(n) * elem_size;
  };
  auto peer = [&](int u) { return (u % n + n + root) % n; };
  int step = 0;
  for (int m = rounds > 0 ? 1 << (rounds - 1) : 0; m >= 1; m >>= 1, ++step) {
    step_desc d;
    if (v % (2 * m) == 0 && v + m < n) {
      d.send_peer = peer(v + m);
      d.send = data + at(v + m);
      d.send_bytes = at(v + 2 * m) - at(v + m);
    } else if (v % (2 * m) == m) {
      d.recv_peer = peer(v - m);
      d.recv = data + at(v);
      d.recv_bytes = at(v + m) - at(v);
    } else {
      continue;
    }
    if (d.send_bytes == 0 && d.recv_bytes == 0) continue;  // both sides see the same empty range
    run_step(t, d, c, tg, phase_name{"scatter (broadcast)", step, steps});
  }
  if (pow2) {
    for (int m = 1; m < n; m <<= 1, ++step) {
      const int u = v ^ m, mine = v / m * m, theirs = u / m * m;
      step_desc d;
      d.send_peer = d.recv_peer = peer(u);
      d.send = data + at(mine);
      d.send_bytes = at(mine + m) - at(mine);
      d.recv = data + at(theirs);
      d.recv_bytes = at(theirs + m) - at(theirs);
      run_step(t, d, c, tg, phase_name{"all-gather (broadcast)", step, steps});
    }
  } else {
    for (int s = 0; s < n - 1; ++s, ++step) {
      const int out = ((v - s) % n + n) % n, in = ((v - s - 1) % n + n) % n;
      step_desc d;
      d.send_peer = peer(v + 1);
      d.send = data + at(out);
      d.send_bytes = at(out + 1) - at(out);
      d.recv_peer = peer(v - 1);
      d.recv = data + at(in);
      d.recv_bytes = at(in + 1) - at(in);
      run_step(t, d, c, tg, phase_name{"all-gather (broadcast)", step, steps});
    }
  }
}

/// Dissemination barrier; `token` is a few bytes of scratch of the call's dtype.
template <class Transport>
void dissemination_barrier(Transport& t, std::byte* token, std::size_t token_bytes, const call_context& c, tag tg) {
  const int n = t.size(), r = t.rank(), rounds = ceil_log2(n);
  int round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    step_desc d;
    d.send_peer = (r + k) % n;
    d.send = token;
    d.send_bytes = token_bytes;
    d.recv_peer = (r - k + n) % n;
    d.recv = token + token_bytes;
    d.recv_bytes = token_bytes;
    run_step(t, d, c, tg, phase_name{"barrier", round, rounds});
  }
}

}  // namespace detail
}  // namespace ddl
