#pragma once
/// \file
/// The planner: enumerates every candidate — each multi-ring whose
/// dimensions are runs of adjacent levels, in every order (the flat ring is
/// the one with a single dimension), recursive doubling and halving-doubling
/// — prices each with the cost model and picks the cheapest. `constexpr`,
/// so a static topology yields a type: `ddl::plan_t<Topology, Bytes>`.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ddl/strategy/cost_model.hpp"
#include "ddl/strategy/direct.hpp"
#include "ddl/strategy/doubling.hpp"
#include "ddl/strategy/multi_ring.hpp"

namespace ddl {

/// Which candidates a planner may choose.
enum class candidates : std::uint8_t { all, multi_ring_only };

/// What the planner may assume about a call besides its size.
/// Example: `ddl::best_plan(topo, bytes, {ddl::candidates::all, true, true})`
/// (ranks share memory; the call is in place).
struct plan_for {
  candidates which = candidates::all;
  /// The ranks read each other's buffers (`ddl::peers_reachable(t)`: shared
  /// memory, or stages shared on one machine): the direct strategies are candidates.
  bool peer_memory = false;
  /// `in == out`: the copies an in-place call adds are priced
  /// (`cost::in_place_extra`).
  bool in_place = false;
  /// The transport completes requests without blocking (`ddl::detail::can_pipeline_v`):
  /// multi-rings pipelined across their levels are candidates.
  bool pipeline = false;
  /// Copy steps (all-gathers, the doubling half of halving-doubling) run at
  /// this multiple of the links' bandwidth (`cost::copy_step_factor`): the
  /// transport's `copy_step_factor` where it declares one.
  double copy_step = cost::copy_step_factor;
  /// The direct strategies' memory bandwidth as a multiple of the links'
  /// (`cost::price_direct`): the transport's `direct_read_factor` where it
  /// declares one, else `cost::direct_read_factor`.
  double direct_read = cost::direct_read_factor;
  /// A direct strategy's synchronisation round (a message to and from every
  /// peer) costs one latency, not ceil(log2 n) (`cost::price_direct`): the
  /// transport's `direct_round_one_step` (MPI).
  bool direct_round_one_step = false;
  /// A direct strategy's reads of peers cross the links, its own memory is
  /// free (`cost::transport_costs::over_links`): the transport's
  /// `direct_reads_over_links` (the simulator).
  bool direct_over_links = false;
  /// Bytes up to which one_shot synchronises through counters in shared
  /// stages (`one_shot::flagged_limit` over a transport with `wait_until`
  /// whose stages are shared: threads, MPI ranks of one machine; 0: never):
  /// priced as one latency, and in place as nothing extra (the input is
  /// copied into the stage either way).
  std::size_t one_round_bytes = 0;
  /// two_shot runs as one call of the transport's at every size
  /// (`flagged_two_shot`: CUDA ranks whose kernels meet through device
  /// counters): its three synchronisations priced as
  /// `cost::whole_two_shot_latency` meetings through counters.
  bool two_shot_one_round = false;
  /// A meeting through counters in latencies (`cost::transport_costs::
  /// flagged`): the transport's `flagged_latency` where it declares one.
  double flagged_latency = 1.0;
  /// two_shot's reducers write their blocks into every rank's result, no
  /// synchronisation between its phases (`two_shot_pushes_v`: threads).
  bool two_shot_pushes = false;
  /// The innermost levels [0, shared_levels) lie inside units whose ranks
  /// share memory (every level with `peer_memory`; over MPI the levels
  /// inside one machine, `ddl::shared_levels`): a multi-ring whose first
  /// dimension lies within them is a candidate with that dimension run
  /// through shared memory too (`plan::direct_first`).
  int shared_levels = 0;
  /// The ranks copy from each other's memory at any address (`read_peer`,
  /// `memory_readable`): two_shot reading the peers' plain buffers where
  /// they lie is a candidate too (`plan::reads`), priced a hair above
  /// two_shot through the stages, so the model keeps the stages and only a
  /// measurement (`strategy/tuning.hpp`) picks it.
  bool reads_memory = false;
  /// The direct strategies write host memory their peers read next
  /// (`peer_stage`: stages, or threads' own buffers; not the simulator's
  /// links): two_shot writing it with streaming stores
  /// (`two_shot::streaming_stages`) is a candidate too (`plan::streams`),
  /// priced a hair above the others so that only a measurement picks it.
  bool streams_stages = false;
  constexpr plan_for(candidates w = candidates::all, bool peer = false, bool inplace = false,
                     bool pipelined = false) noexcept
      : which(w), peer_memory(peer), in_place(inplace), pipeline(pipelined) {}
  /// What any transport of type `T` allows (the direct strategies only
  /// where its ranks share memory; whether stages are shared is known of an
  /// instance, below).
  template <class T>
  static constexpr plan_for transport(candidates w = candidates::all, bool inplace = false) noexcept {
    plan_for q(w, has_peer_memory_v<T>, inplace, detail::can_pipeline_v<T>);
    if constexpr (detail::has_direct_read_factor<T>::value) q.direct_read = T::direct_read_factor;
    if constexpr (detail::has_copy_step_factor<T>::value) q.copy_step = T::copy_step_factor;
    q.direct_round_one_step = direct_round_one_step_v<T>;
    q.direct_over_links = direct_reads_over_links_v<T>;
    if constexpr (has_wait_until_v<T> && has_peer_memory_v<T>) q.one_round_bytes = one_shot::flagged_limit;
    if constexpr (has_flagged_all_reduce_v<T>) q.one_round_bytes = T::flagged_bytes;
    q.two_shot_one_round = has_flagged_two_shot_v<T>;
    q.two_shot_pushes = two_shot_pushes_v<T>;
    if constexpr (detail::has_flagged_latency<T>::value) q.flagged_latency = T::flagged_latency;
    if constexpr (has_peer_memory_v<T>) q.shared_levels = static_cast<int>(max_dims);
    return q;
  }
  /// What transport `t` allows: the candidates `auto_strategy` weighs over it.
  template <class T>
  static plan_for transport(const T& t, candidates w = candidates::all, bool inplace = false) {
    plan_for q = transport<T>(w, inplace);
    q.peer_memory = peers_reachable(t);
    if constexpr (has_wait_until_v<T>)
      if (q.peer_memory) q.one_round_bytes = one_shot::flagged_limit;
    if constexpr (has_flagged_all_reduce_v<T>) q.one_round_bytes = t.flagged_ready() ? T::flagged_bytes : 0;
    if constexpr (has_flagged_two_shot_v<T>) q.two_shot_one_round = t.flagged_ready();
    if constexpr (has_read_peer_v<T>) q.reads_memory = q.peer_memory && t.memory_readable();
    if constexpr (has_peer_stage_v<T> && !direct_reads_over_links_v<T>) q.streams_stages = q.peer_memory;
    return q;
  }
  /// How steps and the direct strategies are priced under these assumptions
  /// (`one_round`: a direct call through counters, no message).
  constexpr cost::transport_costs costs(bool one_round = false) const noexcept {
    cost::transport_costs d;
    d.copy = copy_step;
    d.read = direct_read;
    d.one_round = one_round;
    d.flagged = flagged_latency;
    d.pushes = two_shot_pushes;
    d.round_one_step = direct_round_one_step;
    d.over_links = direct_over_links;
    return d;
  }
  constexpr bool operator==(const plan_for& o) const noexcept {
    return which == o.which && peer_memory == o.peer_memory && in_place == o.in_place && pipeline == o.pipeline &&
           copy_step == o.copy_step && direct_read == o.direct_read && one_round_bytes == o.one_round_bytes &&
           two_shot_one_round == o.two_shot_one_round && two_shot_pushes == o.two_shot_pushes &&
           flagged_latency == o.flagged_latency &&
           shared_levels == o.shared_levels && direct_round_one_step == o.direct_round_one_step &&
           direct_over_links == o.direct_over_links && reads_memory == o.reads_memory &&
           streams_stages == o.streams_stages;
  }
  constexpr bool operator!=(const plan_for& o) const noexcept { return !(*this == o); }
};

/// The innermost levels of `topo` whose units' ranks all share memory on
/// transport `t` (`plan_for::shared_levels`): every level with
/// `peer_memory` (where `peers_reachable`); with stages, the levels up to the largest whose every unit
/// (consecutive ranks) maps each other's stages (`stages_shared_among`, or
/// all of them when `stages_shared()`); else none. The same on every rank.
template <class T>
int shared_levels(const T& t, const topology& topo) {
  const int k = static_cast<int>(topo.count());
  if constexpr (has_peer_memory_v<T>) {
    return peers_reachable(t) ? k : 0;
  } else if constexpr (has_peer_stage_v<T>) {
    if (t.stages_shared()) return k;
    int levels = 0;
    if constexpr (has_stages_among_v<T>) {
      int unit = 1;
      for (int l = 0; l < k; ++l) {
        unit *= topo[static_cast<std::size_t>(l)].extent;
        bool all = true;
        for (int base = 0; base + unit <= t.size() && all; base += unit) all = t.stages_shared_among(base, 1, unit);
        if (!all) break;
        levels = l + 1;
      }
    }
    return levels;
  } else {
    (void)t;
    return 0;
  }
}

namespace detail {
constexpr bool next_permutation(std::array<int, max_dims>& a, std::size_t n) {
  if (n < 2) return false;
  std::size_t i = n - 1;
  while (i > 0 && a[i - 1] >= a[i]) --i;
  if (i == 0) return false;
  std::size_t j = n - 1;
  while (a[j] <= a[i - 1]) --j;
  const int t = a[i - 1];
  a[i - 1] = a[j];
  a[j] = t;
  for (std::size_t l = i, r = n - 1; l < r; ++l, --r) {
    const int u = a[l];
    a[l] = a[r];
    a[r] = u;
  }
  return true;
}
}  // namespace detail

/// two_shot reading its peers' memory (`plan::reads`) is priced at this
/// multiple of two_shot through the stages: the model has no figure for
/// the kernel's copies between processes (faster than the stages or not,
/// by rank count and size), so
/// only a measurement picks it.
inline constexpr double reads_premium = 1.001;
/// two_shot writing its stages with streaming stores (`plan::streams`): at
/// this multiple of two_shot through the stages, for the same reason (it
/// depends on where the ranks' cores lie).
inline constexpr double streams_premium = 1.002;

/// Calls `f(plan)` for every candidate, priced for `bytes` per rank.
/// Enumeration order is fixed (multi-rings by composition then order, then
/// recursive doubling, halving-doubling, one_shot, two_shot), so ties break
/// the same way on every rank and at compile time. The direct strategies are
/// candidates only with `q.peer_memory`; multi-rings with their first
/// dimension through shared memory only within `q.shared_levels`.
template <class F>
constexpr void for_each_candidate(const level* lv, std::size_t k, double bytes, F&& f, plan_for q = {}) {
  const candidates which = q.which;
  const unsigned compositions = 1u << (k - 1);
  for (unsigned cuts = 0; cuts < compositions; ++cuts) {
    plan p{};
    p.algo = algorithm::multi_ring;
    p.bounds[0] = 0;
    std::size_t dims = 0;
    for (std::size_t l = 1; l < k; ++l)
      if (cuts & (1u << (l - 1))) p.bounds[++dims] = static_cast<int>(l);
    p.bounds[++dims] = static_cast<int>(k);
    p.dims = dims;
    for (std::size_t d = 0; d < dims; ++d) p.order[d] = static_cast<int>(d);
    do {
      p.segments = 1;
      cost::price(lv, k, p, bytes, q.costs());
      if (q.in_place) p.seconds += cost::in_place_extra(lv, k, p, bytes);
      f(p);
      // The same multi-ring pipelined across its levels, at the segment
      // count the model prices lowest (a candidate when it beats the plain one).
      int stages = static_cast<int>(dims) + 1;  // a copy per all-gather dimension, the finalize
      for (std::size_t d = 0; d < dims; ++d) stages += 2 * (p.extent(lv, d) - 1);
      if (q.pipeline && q.which == candidates::all && dims > 1 &&
          stages <= static_cast<int>(detail::max_pipeline_stages)) {
        plan best = p;
        for (int K : {2, 4, 8, 16}) {
          plan c = p;
          c.segments = K;
          cost::price(lv, k, c, bytes, q.costs());
          if (c.seconds < best.seconds) best = c;
        }
        if (best.segments > 1) f(best);
      }
      // The same multi-ring with its first dimension through shared memory
      // (where that dimension lies inside units that share it).
      if (dims > 1 && p.bounds[p.order[0] + 1] <= q.shared_levels) {
        plan c = p;
        c.direct_first = true;
        cost::price(lv, k, c, bytes, q.costs());
        if (q.in_place) c.seconds += cost::in_place_extra(lv, k, c, bytes);
        f(c);
      }
    } while (detail::next_permutation(p.order, dims));
  }
  if (which == candidates::all) {
    for (algorithm a : {algorithm::recursive_doubling, algorithm::halving_doubling, algorithm::one_shot,
                        algorithm::two_shot}) {
      if (!q.peer_memory && (a == algorithm::one_shot || a == algorithm::two_shot)) continue;
      plan p{};
      p.algo = a;
      const bool one_round = (a == algorithm::one_shot && bytes <= static_cast<double>(q.one_round_bytes)) ||
                             (a == algorithm::two_shot && q.two_shot_one_round);
      cost::price(lv, k, p, bytes, q.costs(one_round));
      if (q.in_place && !one_round) p.seconds += cost::in_place_extra(lv, k, p, bytes);
      f(p);
      if (a == algorithm::two_shot && q.reads_memory) {  // the same, reading the peers' memory (measured, not modelled)
        plan c = p;
        c.reads = true;
        c.seconds *= reads_premium;
        f(c);
      }
      if (a == algorithm::two_shot && q.streams_stages) {  // the same, its stages written streaming (measured too)
        plan c = p;
        c.streams = true;
        c.seconds *= streams_premium;
        f(c);
      }
    }
  }
}

/// The cheapest candidate for `bytes` per rank (first one on ties).
constexpr plan best_plan(const level* lv, std::size_t k, double bytes, plan_for q = {}) {
  plan best{};
  bool have = false;
  for_each_candidate(lv, k, bytes, [&](const plan& p) {
    if (!have || p.seconds < best.seconds) {
      best = p;
      have = true;
    }
  }, q);
  return best;
}
inline plan best_plan(const topology& t, double bytes, plan_for q = {}) { return best_plan(t.data(), t.count(), bytes, q); }

/// Every candidate, cheapest first.
inline std::vector<plan> all_plans(const topology& t, double bytes, plan_for q = {}) {
  std::vector<plan> v;
  for_each_candidate(t.data(), t.count(), bytes, [&](const plan& p) { v.push_back(p); }, q);
  std::stable_sort(v.begin(), v.end(), [](const plan& a, const plan& b) { return a.seconds < b.seconds; });
  return v;
}

/// The box and order a multi-ring plan runs on.
inline detail::ring_box box_of(const topology& t, const plan& p) {
  std::array<int, max_dims> e{};
  for (std::size_t d = 0; d < p.dims; ++d) e[d] = p.extent(t.data(), d);
  detail::ring_box rb{dynamic_extents(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(p.dims)), p.order,
                      p.direct_first};
  return rb;
}

/// One line naming a plan, e.g. `multi_ring 4x16x4` or `multi_ring 64x4 order 1,0`.
inline std::string describe(const topology& t, const plan& p) {
  if (p.reads) return std::string(name_of(p.algo)) + detail::direct_base::reading_suffix;
  if (p.streams) return std::string(name_of(p.algo)) + detail::direct_base::streaming_suffix;
  if (p.algo != algorithm::multi_ring) return name_of(p.algo);
  if (p.dims == 1) return "ring (flat, " + std::to_string(t.size()) + ")";
  std::string s = std::string("multi_ring ") + box_of(t, p).str();
  if (p.segments > 1) s += " pipelined x" + std::to_string(p.segments);
  return s;
}

/// A table of every candidate, best first, with its predicted time per phase.
inline std::string explain(const topology& t, double bytes, plan_for q = {}) {
  char line[512];
  std::string s;
  std::snprintf(line, sizeof line, "# planner: %.0f bytes on topology %s (%d ranks)\n", bytes, t.str().c_str(), t.size());
  s += line;
  std::snprintf(line, sizeof line, "# %-34s %12s   %s\n", "candidate", "predicted", "per phase (ms): dimensions in order | exchanges, fold | reduce, gather");
  s += line;
  bool first = true;
  for (const plan& p : all_plans(t, bytes, q)) {
    std::string phases;
    for (std::size_t i = 0; i < p.phases; ++i) {
      char b[32];
      std::snprintf(b, sizeof b, "%s%.4g", i ? " " : "", p.phase[i] * 1e3);
      phases += b;
    }
    std::snprintf(line, sizeof line, "%s %-34s %9.4f ms   %s\n", first ? "*" : " ", describe(t, p).c_str(),
                  p.seconds * 1e3, phases.c_str());
    s += line;
    first = false;
  }
  return s;
}

namespace detail {
template <class Topology, std::size_t Bytes>
struct static_plan {
  static constexpr plan value = best_plan(Topology::levels.data(), Topology::count, static_cast<double>(Bytes));
};

template <class Topology, std::size_t Bytes, algorithm A = static_plan<Topology, Bytes>::value.algo>
struct plan_type;
template <class Topology, std::size_t Bytes>
struct plan_type<Topology, Bytes, algorithm::recursive_doubling> {
  using type = recursive_doubling;
};
template <class Topology, std::size_t Bytes>
struct plan_type<Topology, Bytes, algorithm::halving_doubling> {
  using type = halving_doubling;
};
template <class Topology, std::size_t Bytes, class Seq>
struct multi_ring_type;
template <class Topology, std::size_t Bytes, std::size_t... I>
struct multi_ring_type<Topology, Bytes, std::index_sequence<I...>> {
  static constexpr plan p = static_plan<Topology, Bytes>::value;
  using type = multi_ring<extents<p.extent(Topology::levels.data(), I)...>, dim_order<p.order[I]...>>;
};
template <class Topology, std::size_t Bytes>
struct plan_type<Topology, Bytes, algorithm::multi_ring> {
  using type = typename multi_ring_type<Topology, Bytes,
                                        std::make_index_sequence<static_plan<Topology, Bytes>::value.dims>>::type;
};
}  // namespace detail

/// The strategy the planner picks for a static topology and message size, as a type.
/// Example: `ddl::communicator<ddl::plan_t<paper_topology, 350'000'000>, T> comm(t);`
template <class Topology, std::size_t Bytes>
using plan_t = typename detail::plan_type<Topology, Bytes>::type;

/// The plan itself (algorithm, dimensions, order, predicted seconds), at compile time.
template <class Topology, std::size_t Bytes>
inline constexpr plan plan_v = detail::static_plan<Topology, Bytes>::value;

}  // namespace ddl
