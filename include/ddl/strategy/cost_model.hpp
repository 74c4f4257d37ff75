#pragma once
/// \file
/// The cost model: predicted seconds of each candidate strategy on a
/// topology for a message of S bytes. Pure `constexpr` functions, so a
/// static topology is planned at compile time and the simulator (and the
/// tests) can check the same numbers.
///
/// Network model. Ranks are numbered innermost level first (column-major over
/// the levels' extents). A message between two ranks crosses the links of
/// their lowest common level L (the highest level whose coordinate differs).
/// A "unit" of level L is one group of the level below (e.g. a node for the
/// rack level): it holds g_L = prod_{i<L} extent_i ranks and `links_L` links
/// (default g_L: one per rank). If F flows leave one unit at once, each gets
///     B_flow(L, F) = B_L * min(1, links_L / F).
/// A step costs bytes / B_flow + alpha of the slowest link it uses. A step
/// that sends to and receives from the same peer (an exchange: a ring of two,
/// every doubling step) uses the level's exchange bandwidth instead of B_L
/// where the topology gives one.
///
///  * Ring over a dimension spanning levels [lo, hi), m = prod extents ranks:
///      t = 2 (m-1) (S_dim / (m B) + alpha)
///    with every step priced at B; over a transport whose copy steps run at
///    c B (`transport_costs::copy`, below) the all-gather's m-1 steps cost
///    S_dim / (m c B) + alpha each (likewise halving-doubling's doubling
///    half and the fold's return).
///    B = min over the spanned levels of B_flow(L, F_L), F_L = g_L / r_L the
///    number of this dimension's rings that touch one unit (r_L ranks of a
///    ring share a unit, and a ring leaves a unit once); when r_L > 1 the
///    rings all leave from the same group of the level below, and share only
///    its part of the unit's links (links_L / extent_(L-1), at least 1);
///    alpha = the largest latency spanned. A flat ring is the one dimension spanning all levels:
///    2 (n-1) (S / (n B_min) + alpha_max), the paper's formula.
///  * Multi-ring: dimensions are runs of adjacent levels, reduced in some
///    order; dimension j sees S_j = S / (m_1 ... m_(j-1)); t = sum of its rings.
///    With its first dimension through shared memory (`direct_first`, where
///    that dimension's ranks share it), that dimension costs two_shot's
///    price on its levels (below) instead of its ring's.
///  * Recursive doubling (p = largest power of two <= n, nearest partner
///    first): t = sum over the log2(p) exchanges of (S / B_flow + alpha) of
///    the level the exchange crosses (its slowest pair's, when pairs differ),
///    every rank of a unit sending at once (F = g_L), plus 2 (S / B + alpha)
///    for the fold when n != p (again its slowest pair's).
///  * Halving-doubling: exchange k moves S / 2^(k+1) each way, twice (the
///    halving and the doubling): t = sum 2 (S / 2^(k+1) / B_flow + alpha),
///    plus the same fold.
///  * Direct strategies (ranks that read each other's buffers, on transports
///    with `peer_memory` or shared stages; `direct.hpp`): with sigma one
///    synchronisation round, a small message to every peer and from every
///    peer, priced as ceil(log2 n) of the largest latency (a round waits on
///    all n ranks, which costs about what a dissemination barrier's steps
///    do, on threads and MPI ranks alike), and M = `direct_read_factor` B_min the
///    bandwidth one rank gets reading several buffers at once,
///      one_shot: 2 sigma + (n+1) S / M,  two_shot: 3 sigma + (3n-1) S / (n M)
///    (2 sigma where each reducer pushes its block into every result:
///    `transport_costs::pushes`, threads)
///    or, where reads of peers cross the links and a rank's own memory is
///    free (`transport_costs::over_links`: the simulator's shared levels),
///      one_shot: 2 sigma + (n-1) S / B,  two_shot: 3 sigma + 2 (n-1) S / (n B)
///    (over MPI, `mpi_transport::direct_round_one_step`, sigma is one latency:
///    a step's latency there is already a process switch on a crowded node);
///    one_shot synchronised through counters in the stages (calls up to
///    `one_shot::flagged_limit`, over MPI stages and threads) waits on no
///    message: one latency, alpha + (n+1) S / M (below recursive doubling's
///    log2 n latencies at small sizes on threads and MPI alike).
///    two_shot run whole by the transport (`flagged_two_shot`: CUDA ranks,
///    their kernels meeting through device counters) waits on no message
///    either: 1.5 f alpha + (3n-1) S / (n M), three meetings costing 1.5 of
///    one_shot's one (`whole_two_shot_latency`); f alpha is such a meeting,
///    f the transport's `flagged_latency` where it declares one (CUDA: 0.5,
///    where a step of messages costs twice what its latency per rank says),
///    else 1.
#include <array>
#include <cstddef>
#include <cstdint>

#include "ddl/topology/extents.hpp"
#include "ddl/topology/topology.hpp"

namespace ddl {

/// Which algorithm a plan runs.
enum class algorithm : std::uint8_t { multi_ring, recursive_doubling, halving_doubling, one_shot, two_shot };

constexpr const char* name_of(algorithm a) noexcept {
  switch (a) {
    case algorithm::multi_ring: return "multi_ring";
    case algorithm::recursive_doubling: return "recursive_doubling";
    case algorithm::halving_doubling: return "halving_doubling";
    case algorithm::one_shot: return "one_shot";
    case algorithm::two_shot: return "two_shot";
  }
  return "?";
}

/// A candidate strategy with its predicted time.
struct plan {
  algorithm algo = algorithm::multi_ring;
  /// multi_ring: dimension d spans levels [bounds[d], bounds[d+1]).
  std::size_t dims = 0;
  std::array<int, max_dims + 1> bounds{};
  /// multi_ring: order[j] = dimension reduced j-th.
  std::array<int, max_dims> order{};
  /// multi_ring: segments pipelined across its levels (`strategy/pipeline.hpp`);
  /// 1: the paper's multi-ring, one dimension after another.
  int segments = 1;
  /// multi_ring: the first dimension in order runs through shared memory
  /// (`multi_ring::direct_first`), priced as two_shot on its levels.
  bool direct_first = false;
  /// two_shot: copies the peers' plain buffers where they lie (`read_peer`)
  /// instead of through the stages (`direct_base::reading_peers`).
  bool reads = false;
  /// two_shot through the stages: writes them with streaming stores
  /// (`two_shot::streaming_stages`).
  bool streams = false;
  /// Predicted seconds in all.
  double seconds = 0;
  /// Predicted seconds per phase: per dimension in reduction order
  /// (multi_ring), or per exchange step (doubling; fold last).
  std::array<double, 2 * max_dims + 2> phase{};
  std::size_t phases = 0;

  /// Ranks along dimension d (product of its levels' extents).
  constexpr int extent(const level* lv, std::size_t d) const {
    int m = 1;
    for (int l = bounds[d]; l < bounds[d + 1]; ++l) m *= lv[l].extent;
    return m;
  }
};

namespace cost {

/// Ranks in one unit of level `l` (a group of the level below).
constexpr int ranks_below(const level* lv, int l) {
  int g = 1;
  for (int i = 0; i < l; ++i) g *= lv[i].extent;
  return g;
}

/// Links out of one unit of level `l` (default: one per rank in it).
constexpr int unit_links(const level* lv, int l) { return lv[l].links ? lv[l].links : ranks_below(lv, l); }

/// Bandwidth one of `flows` concurrent flows out of a unit gets at level `l`
/// when they may use `links` of its links (0: all of them).
constexpr double flow_bandwidth(const level* lv, int l, int flows, int links = 0) {
  if (links == 0) links = unit_links(lv, l);
  return flows <= links ? lv[l].bandwidth : lv[l].bandwidth * links / flows;
}

/// The same for a flow whose rank also receives from its peer at once.
constexpr double exchange_bandwidth(const level* lv, int l, int flows, int links = 0) {
  const double b = flow_bandwidth(lv, l, flows, links);
  return lv[l].exchange > 0 ? b * lv[l].exchange / lv[l].bandwidth : b;
}

/// The links of level `l` that parallel rings with `r` > 1 members in each
/// unit can use: every such ring leaves the unit from the same group of the
/// level below (its last member's), so they share that group's part of the
/// unit's links (links sit with the groups, e.g. one NIC per node).
constexpr int exit_links(const level* lv, int l, int r) {
  const int links = unit_links(lv, l);
  if (r == 1 || l == 0) return links;
  const int share = links / lv[l - 1].extent;
  return share > 0 ? share : 1;
}

/// Seconds for the rings of one dimension spanning levels [lo, hi) to
/// reduce-scatter and all-gather `bytes` per rank: (m-1) (bytes/(m B) + alpha)
/// each, the all-gather's steps at `copy` B (`transport_costs::copy`).
/// A ring of two is an exchange (each rank's one peer is both neighbours).
constexpr double ring_dimension(const level* lv, int lo, int hi, double bytes, double copy) {
  int m = 1;
  for (int l = lo; l < hi; ++l) m *= lv[l].extent;
  if (m == 1) return 0;
  double b = 0, alpha = 0;
  int r = 1;  // ranks of one ring inside a unit of level l
  for (int l = lo; l < hi; ++l) {
    if (lv[l].extent > 1) {
      const int flows = ranks_below(lv, l) / r, links = exit_links(lv, l, r);
      const double bl = m == 2 ? exchange_bandwidth(lv, l, flows, links) : flow_bandwidth(lv, l, flows, links);
      b = (b == 0 || bl < b) ? bl : b;
      alpha = lv[l].latency > alpha ? lv[l].latency : alpha;
    }
    r *= lv[l].extent;
  }
  return (m - 1) * (bytes / (m * b) * (1 + 1 / copy) + 2 * alpha);
}

/// Memory bandwidth of a rank reading its peers' buffers directly, as a
/// multiple of the level's link bandwidth B. For in-process ranks B is the
/// rate of a fused receive-and-reduce, which moves 3 bytes of memory traffic
/// per byte; a direct reduction streams n buffers at once. 2 reproduced the
/// ranking measured on threads with copy steps priced as reduces; the
/// threads now declare 2.25 beside their `copy_step_factor`
/// (`local_transport`). A transport may declare its own
/// (`static constexpr double direct_read_factor`, see
/// `plan_for::direct_read`): where B is the rate of its messages and the
/// direct strategies copy at memory speed (MPI's shared stages), it is larger.
inline constexpr double direct_read_factor = 2.0;

/// Rate of a step that only copies what it receives (an all-gather's, the
/// doubling half of halving-doubling, the fold's return) as a multiple of
/// the level's B, for in-process ranks: B is the rate of a fused
/// receive-and-reduce, 3 bytes of memory traffic per byte (two reads, a
/// write), and a copy moves 2. On 2 ranks recursive doubling's one exchange
/// of S reduces S (3S of traffic) where halving-doubling reduces S/2 and
/// copies S/2 (2.5S); priced alike (c = 1) the model took recursive doubling
/// at every size, and it was not the fastest; with c = 1.5 it takes the exchange only below 6 alpha B. A transport
/// declares its own (`static constexpr double copy_step_factor`); 1, where
/// a copy costs what a reduce costs (the links bound both: the simulator;
/// MPI and CUDA peers, whose costs were fitted so).
inline constexpr double copy_step_factor = 1.0;

/// How a transport's steps are priced beyond its levels' link costs:
/// copy steps, and the direct strategies (and a `direct_first` dimension)
/// (`plan_for::costs`).
struct transport_costs {
  /// Copy steps run at `copy` B (`copy_step_factor`).
  double copy = copy_step_factor;
  /// M / B: their memory bandwidth as a multiple of the links'
  /// (`direct_read_factor` unless the transport says).
  double read = direct_read_factor;
  /// The direct call synchronises through counters, no message: one_shot
  /// through stages' counters or the transport's `flagged_all_reduce` in
  /// `flagged` latencies, two_shot through its `flagged_two_shot` in
  /// `whole_two_shot_latency` times that.
  bool one_round = false;
  /// A meeting through counters, in latencies: the transport's
  /// `flagged_latency` where it declares one, else 1.
  double flagged = 1.0;
  /// two_shot writes each reduced block into every rank's result as soon as
  /// it is reduced (`two_shot_pushes_v`: threads), so no synchronisation
  /// parts its two phases.
  bool pushes = false;
  /// A synchronisation round costs one latency, not ceil(log2 n) (the
  /// transport's `direct_round_one_step`: MPI, where a step's latency is
  /// already a process switch on a crowded node).
  bool round_one_step = false;
  /// Reads of a peer's memory cross the links and the reader's own memory
  /// costs nothing (the transport's `direct_reads_over_links`: the
  /// simulator's shared levels, a node's GPUs over NVLink): the bytes read
  /// from peers at the links' rate B instead of all memory traffic at
  /// `read` B: one_shot (n-1) S / B, two_shot (n-1) S / (n B) per phase.
  bool over_links = false;
};

/// A two_shot call run whole by the transport, its kernels meeting three
/// times through counters (`flagged_two_shot`), costs this many times a
/// one_shot call through counters (three meetings, but its kernels overlap
/// part of them), so one_shot stays the plan for the smallest calls.
inline constexpr double whole_two_shot_latency = 1.5;

constexpr void price_direct(const level* lv, std::size_t k, plan& p, double bytes, const transport_costs& d);
constexpr double direct_dimension(const level* lv, int lo, int hi, double bytes, const transport_costs& d);

/// Fills `p.seconds` and `p.phase` for a multi-ring plan; its phases are
/// each dimension's time (for all segments).
///
/// Pipelined over K = `p.segments` segments, the dimensions run at once and
/// share links: a message crosses every level up to the one its ring spans
/// (a ring across nodes also uses each rank's in-node link, unless that
/// level's links are private: `level::private_links`). With tau_j
/// dimension j's time for S/K bytes and, per level l, busy_l the time one
/// segment keeps l's links busy (tau_j for the dimension spanning l, plus
/// every outer dimension's bytes at l's bandwidth),
///     t = sum_j tau_j + (K - 1) max_l busy_l.
/// Where a level's links are fewer than its unit's ranks (a node's one NIC),
/// the outer rings' flows hold shares of them while they last: the
/// dimension spanning that level is charged (1 + c) tau_j, c the outer
/// dimensions crossing it (links shared per flow, as the simulator does).
/// A `direct_first` plan's first dimension is priced as two_shot on its
/// levels (`direct_dimension`, priced as `costs` says); the rings' copy
/// steps at `costs.copy` B.
constexpr void price_multi_ring(const level* lv, plan& p, double bytes, const transport_costs& costs = {}) {
  const int K = p.segments > 1 ? p.segments : 1;
  double data = bytes / K, total = 0;
  std::array<double, max_dims> busy{}, own{};
  std::array<int, max_dims> outer{};
  for (std::size_t j = 0; j < p.dims; ++j) {
    const int d = p.order[j];
    const int lo = p.bounds[d], hi = p.bounds[d + 1], m = p.extent(lv, static_cast<std::size_t>(d));
    const double t = j == 0 && p.direct_first ? direct_dimension(lv, lo, hi, data, costs)
                                              : ring_dimension(lv, lo, hi, data, costs.copy);
    p.phase[j] = K * t;
    total += t;
    for (int l = lo; l < hi; ++l) own[static_cast<std::size_t>(l)] += t;
    if (m > 1)
      for (int l = 0; l < lo; ++l)
        if (lv[l].extent > 1 && !lv[l].private_links) {
          busy[static_cast<std::size_t>(l)] += 2.0 * (m - 1) / m * data / flow_bandwidth(lv, l, ranks_below(lv, l));
          ++outer[static_cast<std::size_t>(l)];
        }
    data /= m;
  }
  for (std::size_t l = 0; l < max_dims; ++l) {
    const int li = static_cast<int>(l);
    const bool shared = own[l] > 0 && unit_links(lv, li) < ranks_below(lv, li);
    busy[l] += own[l] * (shared ? 1 + outer[l] : 1);
  }
  double slowest = 0;
  for (double b : busy) slowest = b > slowest ? b : slowest;
  p.phases = p.dims;
  p.seconds = K > 1 ? total + (K - 1) * slowest : total;
}

/// Lowest common level of ranks a and b (the highest differing coordinate).
constexpr int common_level(const level* lv, std::size_t k, int a, int b) {
  int top = 0;
  for (std::size_t l = 0; l < k; ++l) {
    if (a % lv[l].extent != b % lv[l].extent) top = static_cast<int>(l);
    a /= lv[l].extent;
    b /= lv[l].extent;
  }
  return top;
}

/// Fills `p.seconds` and `p.phase` for recursive doubling or halving-doubling;
/// their copy steps (the doubling half, the fold's return) at `copy` B.
constexpr void price_doubling(const level* lv, std::size_t k, plan& p, double bytes, double copy) {
  int n = 1;
  for (std::size_t l = 0; l < k; ++l) n *= lv[l].extent;
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int rem = n - p2;
  auto real = [rem](int nr) { return nr < rem ? 2 * nr + 1 : nr + rem; };
  const bool halving = p.algo == algorithm::halving_doubling;
  double total = 0, part = bytes;
  std::size_t ph = 0;
  // An exchange lasts as long as its slowest pair: with folded ranks or
  // extents that are not powers of two, pairs at one distance can cross
  // different levels (ranks 3 and 7 of a 2x3x5 box cross racks at mask 2).
  auto slowest = [&](int mask, double b_pair) {
    double t = 0;
    for (int nr = 0; nr < p2; ++nr) {
      const int l = common_level(lv, k, real(nr), real(nr ^ mask));
      const double tp = b_pair / exchange_bandwidth(lv, l, ranks_below(lv, l)) + lv[l].latency;
      t = tp > t ? tp : t;
    }
    return t;
  };
  for (int mask = 1; mask < p2; mask <<= 1) {
    double t = 0;
    if (halving) {
      part /= 2;
      t = slowest(mask, part) + slowest(mask, part / copy);
    } else {
      t = slowest(mask, bytes);
    }
    p.phase[ph++] = t;
    total += t;
  }
  if (rem > 0) {
    double t = 0;
    for (int r = 0; r < 2 * rem; r += 2) {
      const int l = common_level(lv, k, r, r + 1);
      const double tp = bytes / lv[l].bandwidth * (1 + 1 / copy) + 2 * lv[l].latency;
      t = tp > t ? tp : t;
    }
    p.phase[ph++] = t;
    total += t;
  }
  p.phases = ph;
  p.seconds = total;
}


/// Fills `p.seconds` and `p.phase` for `one_shot` or `two_shot`: the
/// reduction (and, for two_shot, the gather) priced by memory traffic, plus
/// one synchronisation round per phase boundary, on the slowest level,
/// as `d` says (`transport_costs`).
constexpr void price_direct(const level* lv, std::size_t k, plan& p, double bytes, const transport_costs& d = {}) {
  int n = 1;
  double b = 0, sigma = 0;
  for (std::size_t l = 0; l < k; ++l) {
    n *= lv[l].extent;
    if (lv[l].extent > 1) {
      b = (b == 0 || lv[l].bandwidth < b) ? lv[l].bandwidth : b;
      sigma = lv[l].latency > sigma ? lv[l].latency : sigma;
    }
  }
  p.phases = 0;
  p.seconds = 0;
  if (n == 1) return;
  const double alpha = sigma;
  int rounds = 0;  // ceil(log2 n) latencies per synchronisation round
  while ((1 << rounds) < n) ++rounds;
  if (!d.round_one_step) sigma *= rounds;
  const double m = d.read * b;
  if (p.algo == algorithm::one_shot) {
    p.phase[0] =
        (d.one_round ? d.flagged * alpha : 2 * sigma) + (d.over_links ? (n - 1) * bytes / b : (n + 1) * bytes / m);
    p.phases = 1;
  } else {
    // Its synchronisations: two before the reduction, one before the gather
    // (through counters: `whole_two_shot_latency` meetings' worth in all;
    // none before a gather the reducers push).
    const double before = d.one_round ? whole_two_shot_latency * d.flagged * alpha : 2 * sigma;
    const double between = d.one_round || d.pushes ? 0 : sigma;
    if (d.over_links) {
      p.phase[0] = before + (n - 1) * bytes / n / b;   // block r of the n-1 peers' buffers, over the links
      p.phase[1] = between + (n - 1) * bytes / n / b;  // the n-1 reduced blocks, over the links
    } else {
      p.phase[0] = before + (n + 1) * bytes / n / m;          // reduce own block from n buffers
      p.phase[1] = between + 2.0 * (n - 1) * bytes / n / m;  // copy the n-1 other blocks
    }
    p.phases = 2;
  }
  for (std::size_t i = 0; i < p.phases; ++i) p.seconds += p.phase[i];
}

/// Seconds for a dimension spanning levels [lo, hi) to reduce-scatter and
/// all-gather `bytes` per rank through shared memory (a multi-ring's
/// `direct_first` dimension): two_shot's price on those levels.
constexpr double direct_dimension(const level* lv, int lo, int hi, double bytes, const transport_costs& d) {
  plan q{};
  q.algo = algorithm::two_shot;
  transport_costs two_shot = d;
  two_shot.one_round = false;
  two_shot.pushes = false;  // a reduce-scatter, then an all-gather: a synchronisation between
  price_direct(lv + lo, static_cast<std::size_t>(hi - lo), q, bytes, two_shot);
  return q.seconds;
}

/// Predicted seconds of `p` (any algorithm) for `bytes` per rank; fills its
/// phases, as the transport's `costs` say (`transport_costs`).
constexpr void price(const level* lv, std::size_t k, plan& p, double bytes, const transport_costs& costs = {}) {
  if (p.algo == algorithm::multi_ring) price_multi_ring(lv, p, bytes, costs);
  else if (p.algo == algorithm::one_shot || p.algo == algorithm::two_shot) price_direct(lv, k, p, bytes, costs);
  else price_doubling(lv, k, p, bytes, costs.copy);
}

/// Seconds an in-place call (`in == out`) adds to plan `p`: one_shot builds
/// the result in its workspace and copies it back (over threads above its
/// stage it lands the result in cache-sized segments instead, which is
/// faster, but it is still priced with the copy: at those sizes it is no
/// candidate); recursive doubling either
/// double-buffers through its workspace and after an odd number of exchanges
/// copies back (a buffer of one chunk on a transport that reduces as it
/// receives, and on a device), or lands each slice and reduces it into the
/// buffer only once that slice's send has completed (MPI; threads from two
/// chunks), which costs about as much. Both priced as one copy after an odd number of
/// exchanges, which moves 2 bytes per byte where a fused receive-and-reduce
/// (B) moves 3: S / (1.5 B_min).
constexpr double in_place_extra(const level* lv, std::size_t k, const plan& p, double bytes) {
  int n = 1;
  double b = 0;
  for (std::size_t l = 0; l < k; ++l) {
    n *= lv[l].extent;
    if (lv[l].extent > 1) b = (b == 0 || lv[l].bandwidth < b) ? lv[l].bandwidth : b;
  }
  if (n == 1 || b == 0) return 0;
  int steps = 0;
  for (int m = 1; m * 2 <= n; m *= 2) ++steps;
  const bool copies = p.algo == algorithm::one_shot || (p.algo == algorithm::recursive_doubling && steps % 2 == 1);
  return copies ? bytes / (1.5 * b) : 0;
}

/// Uniform ring, the closed form every model must agree with:
/// 2 (n-1) (S / (n B) + alpha).
constexpr double uniform_ring(int n, double bytes, double bandwidth, double latency) {
  return n == 1 ? 0.0 : 2.0 * (n - 1) * (bytes / (n * bandwidth) + latency);
}

/// The bandwidth floor of an all-reduce: what no algorithm that reduces at
/// the ranks can beat, and the levels whose links set it.
struct floor_bound {
  double seconds = 0;
  int level = 0;  ///< innermost first; meaningless when `seconds` is 0
  int last = 0;   ///< the links of levels `level`..`last` set it (`last` > `level`: `level` is private)
};

/// The bandwidth floor of an all-reduce of `bytes` per rank on levels
/// `lv[0..k)`, on the network of the simulator (and of the pipelined
/// multi-ring's price). Seen from level l the ranks are m_l = n / g_l units,
/// and each element's reduction is a gossip among them in which every
/// transfer is one-way: it takes at least 2 (m_l - 1) transfers (the one-way
/// gossip bound), so the units send 2 (m_l - 1) S bytes out of themselves in
/// all. Every such byte crosses level l's links, or, where those are private
/// (`level::private_links`), the links of some level from l up to the first
/// level q above l that is not: the message's lowest common level L if L <= q,
/// else q's. Those links together carry at most C_l = sum_{j=l..q} (n / g_j)
/// links_j B_j bytes a second, so
///     t >= max_l 2 (m_l - 1) S / C_l
/// (levels of extent 1 skipped; B_j the larger of the one-way and the
/// exchange bandwidth). Where no level is private this is
/// max_l 2 (m_l - 1) / m_l * S / (links_l B_l), and at the ranks' own level
/// (g_0 = 1, one link each) the ring's bandwidth term, 2 (n-1) S / (n B_0).
/// Latency is not counted: the floor is for large messages.
constexpr floor_bound all_reduce_floor(const level* lv, std::size_t k, double bytes) {
  int n = 1;
  for (std::size_t l = 0; l < k; ++l) n *= lv[l].extent;
  floor_bound f{};
  for (std::size_t l = 0; l < k; ++l) {
    const int li = static_cast<int>(l);
    if (lv[l].extent == 1) continue;
    const int m = n / ranks_below(lv, li);
    double capacity = 0;  // bytes/s out of all units of level l, over the links they may leave by
    std::size_t j = l;
    for (;; ++j) {
      if (lv[j].extent > 1) {
        const double b = lv[j].exchange > lv[j].bandwidth ? lv[j].exchange : lv[j].bandwidth;
        capacity += static_cast<double>(n / ranks_below(lv, static_cast<int>(j))) * unit_links(lv, static_cast<int>(j)) * b;
      }
      if (j + 1 == k || (lv[j].extent > 1 && !lv[j].private_links)) break;
    }
    const double t = 2.0 * (m - 1) * bytes / capacity;
    if (t > f.seconds) f = floor_bound{t, li, static_cast<int>(j)};
  }
  return f;
}

}  // namespace cost
}  // namespace ddl
