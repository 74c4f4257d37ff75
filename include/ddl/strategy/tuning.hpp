#pragma once
/// \file
/// Measured choice, for `auto_strategy`'s all-reduces and the
/// communicator's broadcasts: the cost model ranks the candidates, the first
/// calls of each size class time the close ones, and every rank settles on
/// the plan whose slowest rank was fastest.
///
/// Why: the model prices a step by one latency and one bandwidth per level;
/// what a call really costs also depends on caches, on how many ranks share
/// a core, on how an all-to-all round compares with a pairwise exchange, so
/// the model's first choice is not always the fastest. Measuring a handful of calls once per
/// size class costs little against a training run's thousands.
///
/// How, per size class (all-reduces of [2^k, 2^(k+1)) bytes per rank, in
/// place and out of place apart):
///   - candidates: the model's best, then the others it predicts within
///     `within` times of it, best first, at most `max_candidates` (one
///     multi-ring at most: its orders differ little);
///   - one untimed warm-up call (the model's plan: a class's first call pays
///     for fresh pages and first contacts between peers), then `trials`
///     calls each (`small_trials` in classes below 64 KiB), one candidate after another
///     (c0 c0 c0 c1 c1 c1 ...), every rank the same candidates in the same order, each timed on
///     each rank; a rank's figure for a candidate is the median of its
///     trials (the first call of a plan may allocate, fault pages in, or find
///     the caches as the previous plan left them; the least of three
///     rewards a lucky call and chose plans that then ran slower). Blocks,
///     not turns: the choice will
///     run call after call, so each is timed that way (taken in turns, a
///     plan can look faster than it runs once chosen);
///   - after the last trial, one round in which every rank sends its figures
///     to every other (`detail::exchange_with_all`, tagged
///     `tag_offset::tuning` inside the call, under the trial's stamp); every
///     rank then computes the
///     same choice from the same table: the candidate whose slowest rank was
///     fastest, unless it beats the model's by less than `margin`, and from
///     then on runs it for the class (the model's own choice at each size
///     when that wins).
/// The candidates are all correct for every size, so a call mid-tuning is
/// as right as any other; only its speed varies.
///
/// Every all-reduce under `auto` carries its plan in its stamp (folded into
/// the hash bits, `transport/stamp.hpp`): ranks that came to different plans
/// get `mismatch_error`, never mixed algorithms. That happens when one timed
/// out in the agreement round (it falls back to the model), and when ranks
/// differ in placement (in place on some, out of place on others) where
/// placement changes the plan: as with `MPI_IN_PLACE`, every rank of an
/// `auto` all-reduce is expected to pass the same placement.
///
/// The choice follows the timings, so it can differ from one run to the
/// next; plans add in different orders, so a floating-point sum may then
/// differ in its last bits between runs (never between ranks of one call),
/// and SGD grows such differences: the Fashion-MNIST comparison with gloo
/// (`examples/torch/train_ddp.py --compare`, 4 ranks) stays within 1.4e-6
/// of gloo's loss over 50 steps on the model's plan and parts by 3.5e-3 when
/// the ring is measured fastest. Hence off by default, as PyTorch's
/// `cudnn.benchmark`.
///
/// Applies where wall-clock time means something and the figures are cheap
/// to trade: host memory (device calls are stream-ordered, their host time
/// is not theirs), a transport that is not a set of fibers in virtual time
/// (the simulator), 2-`max_ranks` ranks, and `options::tune_bytes`
/// (`DDL_TUNE`, e.g. `16M`; off by default). Reduce-scatter follows the
/// model, but for its direct form over stages, measured as a copy is (the
/// stages cached or streamed, or reading the peers: `auto_strategy::reduce_scatter`).
///
/// All-gathers (`auto_strategy`'s) and broadcasts (the communicator's,
/// unless `DDL_BROADCAST` forces one) are measured the same way, up to
/// `options::tune_copies_bytes` (`DDL_TUNE_COPIES`, no limit by default: they
/// copy and never reduce, so the choice cannot change a result's bits), from
/// 64 KiB, 16 KiB on 2 ranks (`measured_choice::copies_from_for`; classes
/// below 64 KiB time `small_trials` calls a candidate, not `trials`). An
/// all-gather's candidates are one plan of each form it takes (see
/// `auto_strategy`), per size class of the whole vector, in place and out of
/// place apart (every rank must pass the same placement, as with
/// `MPI_IN_PLACE`; calls of fewer elements than ranks are not measured). A
/// broadcast's, per size class of the message: the binomial tree,
/// the pipelined chain and scatter + all-gather that the model prices within
/// 3x of its choice (on 2 ranks only the tree): on processes sharing cores
/// the model's broadcast ranking can miss too.
///
/// An all-reduce that is not tuned (`tune_bytes`) and whose model plan is
/// direct (one_shot or two_shot) is measured the way copies are, within the
/// same limits, among the model's plan, the other direct algorithm where the
/// model prices it within `within` of its plan, and two_shot's forms (its
/// stages streamed, or reading the peers' memory, `plan::reads`): each
/// reduces every element once, over the ranks' inputs in rank order, so the
/// bits are the same whichever wins. So is one on 2 ranks whose reduction commutes exactly
/// (`detail::order_free`: sum, prod, avg; integers' min and max), among one
/// plan of each algorithm: every plan leaves the same bits there.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "ddl/core/hash.hpp"
#include "ddl/strategy/broadcast.hpp"
#include "ddl/strategy/planner.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/transport/cooperative.hpp"
#include "ddl/transport/stamp.hpp"

namespace ddl::detail {

/// The candidates measured for `bytes`: the model's best first, then the
/// others predicted within `within` x its time, best first; at most `most`,
/// and one multi-ring at most.
inline std::vector<plan> tuning_candidates(const topology& t, double bytes, plan_for q, double within, int most) {
  std::vector<plan> all = all_plans(t, bytes, q), v;
  if (all.empty()) return v;
  v.push_back(all.front());
  bool ring = all.front().algo == algorithm::multi_ring;
  for (std::size_t i = 1; i < all.size() && static_cast<int>(v.size()) < most; ++i) {
    const plan& p = all[i];
    if (p.seconds > within * all.front().seconds) break;
    if (p.algo == algorithm::multi_ring) {
      if (ring) continue;
      ring = true;
    }
    v.push_back(p);
  }
  return v;
}

/// Each candidate's slowest rank: `table` holds `ranks` rows of `stride`
/// seconds, the first `count` of each a rank's median time per candidate
/// (infinity: none measured); `worst[j]` gets the largest of column j.
inline void slowest_of(const double* table, int ranks, int stride, int count, double* worst) {
  for (int j = 0; j < count; ++j) {
    worst[j] = 0;
    for (int r = 0; r < ranks; ++r) worst[j] = std::max(worst[j], table[r * stride + j]);
  }
}

/// The candidate whose slowest rank is fastest, unless it beats candidate 0
/// (the model's) by less than `margin` (its time must be below `margin` x
/// the model's): then 0.
inline int tuning_decision(const double* worst, int count, double margin) {
  int best = 0;
  for (int j = 1; j < count; ++j)
    if (worst[j] < worst[best]) best = j;
  return worst[best] < margin * worst[0] ? best : 0;
}

/// A plan's identity for the stamp: its algorithm and shape.
inline std::uint64_t plan_hash(const plan& p) {
  std::uint64_t h = fnv1a_u64(static_cast<std::uint64_t>(p.algo), fnv1a_basis);
  h = fnv1a_u64(p.dims, h);
  for (std::size_t d = 0; d < p.dims; ++d) {
    h = fnv1a_u64(static_cast<std::uint64_t>(p.bounds[d + 1]), h);
    h = fnv1a_u64(static_cast<std::uint64_t>(p.order[d]), h);
  }
  if (p.direct_first) h = fnv1a_u64(0xd1u, h);
  if (p.reads) h = fnv1a_u64(0x7eadu, h);
  if (p.streams) h = fnv1a_u64(0x57eau, h);
  return fnv1a_u64(static_cast<std::uint64_t>(p.segments), h);
}
inline std::uint64_t plan_hash(const broadcast_plan& p) {
  return fnv1a_u64(static_cast<std::uint64_t>(p.segments),
                   fnv1a_u64(static_cast<std::uint64_t>(p.algo) + 0x100u, fnv1a_basis));
}

/// `base` (a call's tag) with plan `p` folded into its stamp's hash bits, so
/// ranks running different plans in one call see different stamps.
template <class Plan>
tag with_plan_stamp(tag base, const Plan& p) {
  if (!is_stamped(base)) return base;
  std::uint64_t h = plan_hash(p);
  h ^= h >> 31;
  return base ^ (tag(h & stamp_hash_mask) << (stamp_shift + stamp_field_bits));
}

/// `c` with plan `p` folded into its stamp (`with_plan_stamp`).
template <class Plan>
call_context with_plan_stamp(const call_context& c, const Plan& p) {
  call_context d = c;
  d.base_tag = with_plan_stamp(c.base_tag, p);
  return d;
}

/// The broadcasts measured for `bytes` of `elem_size`-byte elements on
/// `topo`: the model's choice (`broadcast_choice`) first, then the other
/// algorithms it prices within `within` x of it, cheapest first, at most
/// `most`. Chain and scatter + all-gather only where the model would weigh
/// them (more than 2 ranks; scatter blocks of at least one element), direct
/// where `costs.direct`; priced with the transport's `costs`.
inline std::vector<broadcast_plan> tuning_candidates(std::size_t bytes, const topology& topo, std::size_t elem_size,
                                                     double within, int most, const broadcast_costs& costs = {}) {
  using algo = broadcast_algorithm;
  std::vector<broadcast_plan> v{broadcast_choice(bytes, topo, elem_size, algo::binomial, costs)};
  const std::size_t elems = bytes / std::max<std::size_t>(elem_size, 1);
  if (topo.size() > 2 && bytes > 0) {
    v.push_back(broadcast_choice(bytes, topo, elem_size, algo::chain, costs));
    if (elems >= static_cast<std::size_t>(topo.size()))
      v.push_back(broadcast_choice(bytes, topo, elem_size, algo::scatter_allgather, costs));
  }
  if (costs.direct && bytes > 0) v.push_back(broadcast_choice(bytes, topo, elem_size, algo::direct, costs));
  std::stable_sort(v.begin(), v.end(), [](const broadcast_plan& a, const broadcast_plan& b) { return a.seconds < b.seconds; });
  std::vector<broadcast_plan> out;
  for (const auto& p : v)
    if (static_cast<int>(out.size()) < most && p.seconds <= within * v.front().seconds) out.push_back(p);
  return out;
}

/// One communicator's measured choices among plans of type `Plan` (`plan`
/// for `auto_strategy`'s all-reduces, `broadcast_plan` for the
/// communicator's broadcasts).
///
/// One that follows drift (`measured_choice(true)`: `auto`'s choices among
/// forms that give the same bits, the stages cached or streamed, reading the
/// peers, an all-gather's forms) keeps timing its choice: every `window`
/// calls of a class (`drift_window` at first) the ranks trade one flag each,
/// whether more than half of those calls took over `drift` x the rank's own
/// median time for that plan in the trials (scaled to the call's bytes), and
/// if any rank says so the
/// class is measured again. A choice that stands again doubles the window
/// (up to `most_window`), so a class that is merely noisy costs one trade
/// per thousands of calls. Why: a host may move a VM's vCPUs between close
/// and far apart while a job runs, and the fastest form of a 2-rank
/// all-reduce moves with them; a choice kept for good then falls far behind.
template <class Plan>
class measured_choice {
 public:
  measured_choice() = default;
  explicit measured_choice(bool follows_drift) noexcept : follows_(follows_drift) {}
  static constexpr int drift_window = 64;
  static constexpr int most_window = 4096;
  static constexpr double drift = 2.0;
  static constexpr int max_candidates = 5;
  /// Timed calls of each candidate in a class from `copies_from` up ...
  static constexpr int trials = 3;
  /// ... and below it (calls of a few µs, where one call the scheduler or
  /// a cache line's trip between the cores delays moves a median of 3:
  /// see `copies_from_for`).
  static constexpr int small_trials = 9;
  static constexpr int trials_for(std::size_t bytes) noexcept { return bytes < copies_from ? small_trials : trials; }
  static constexpr double within = 3.0;
  static constexpr double margin = 0.93;
  static constexpr int max_ranks = 64;
  /// The most calls a size class of `bytes` spends measuring, and the most
  /// any class does.
  static constexpr int most_calls_for(std::size_t bytes) noexcept { return 1 + max_candidates * trials_for(bytes); }
  static constexpr int most_calls = 1 + max_candidates * small_trials;

  /// One size class.
  struct entry {
    std::vector<Plan> candidates;
    int calls = 0;  ///< calls made while measuring (the warm-up included)
    std::array<double, max_candidates> mine{};   ///< this rank's median seconds per candidate
    std::array<double, small_trials> trial{};    ///< the running candidate's trials so far (`trials_for(bytes)`)
    std::array<double, max_candidates> worst{};  ///< after the agreement: the slowest rank's
    int chosen = -1;                             ///< index into `candidates` once decided
    std::size_t bytes = 0;                       ///< the size its candidates were priced at
    bool in_place = false;
    int since = 0;                  ///< following drift: calls of the choice in this window
    int slow = 0;                   ///< of which slower than `drift` x this rank's trial time
    int window = drift_window;      ///< calls between two trades of the flags
    int previous = -1;              ///< the choice before a measurement again
    int measured = 0;               ///< times the class was measured (1 + the times again)
  };

  /// Copies (all-gathers, broadcasts) of fewer bytes follow the model: a
  /// few trials of calls of a few µs time the scheduler more than the plans
  /// (more processes than cores).
  static constexpr std::size_t copies_from = std::size_t{64} << 10;
  /// Two ranks measure them from 16 KiB, with `small_trials` calls a
  /// candidate below `copies_from`: no rank there waits for a core another
  /// holds, and which form wins moves with where the host places the two
  /// cores.
  static constexpr std::size_t pair_copies_from = std::size_t{16} << 10;
  static constexpr std::size_t copies_from_for(int ranks) noexcept {
    return ranks == 2 ? pair_copies_from : copies_from;
  }
  /// Whether calls of `bytes` on `t`, in memory `c.mem`, are tuned: up to
  /// `options::tune_bytes` for reductions; for `copies` (all-gathers,
  /// broadcasts, the forms that give the same bits) from
  /// `copies_from_for(t.size())` up to `options::tune_copies_bytes`.
  template <class Transport>
  static bool applies(const Transport& t, const call_context& c, std::size_t bytes, bool copies = false) {
    if constexpr (has_cooperative<Transport>::value) {
      return false;  // virtual time
    } else {
      const std::size_t limit = !c.opts ? 0 : copies ? c.opts->tune_copies_bytes : c.opts->tune_bytes;
      return bytes > 0 && (!copies || bytes >= copies_from_for(t.size())) && bytes <= limit && t.size() >= 2 &&
             t.size() <= max_ranks && c.mem && std::strcmp(c.mem->name, "host") == 0;
    }
  }

  /// Runs one call of `bytes` through `run(plan, context)`: a trial while
  /// its class is being measured, else the class's choice (`model`, the
  /// model's plan for exactly this size, when the model's plan won).
  /// `candidates()` gives the class's candidates, the model's first, when
  /// the class is first seen.
  template <class Transport, class Candidates, class Run>
  void run(Transport& t, std::size_t bytes, bool in_place, const Plan& model, const call_context& c,
           Candidates&& candidates, Run&& run) {
    entry& e = entries_[key(bytes, in_place)];
    if (e.candidates.empty()) {
      e.candidates = candidates();
      if (static_cast<int>(e.candidates.size()) > max_candidates) e.candidates.resize(max_candidates);
      e.mine.fill(std::numeric_limits<double>::infinity());
      e.bytes = bytes;
      e.in_place = in_place;
      if (e.candidates.size() < 2) e.chosen = 0;
    }
    if (e.chosen >= 0) {
      const Plan& p = e.chosen == 0 ? model : e.candidates[static_cast<std::size_t>(e.chosen)];
      const call_context cp = with_plan_stamp(c, p);
      if (!follows_ || e.candidates.size() < 2) {
        run(p, cp);
        return;
      }
      const auto t0 = std::chrono::steady_clock::now();
      run(p, cp);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // Against the trial time scaled to this call's size: a class spans
      // up to 2x the bytes its trials ran at.
      const double scale = std::max(1.0, static_cast<double>(bytes) / static_cast<double>(e.bytes));
      if (s > drift * scale * e.mine[static_cast<std::size_t>(e.chosen)]) ++e.slow;
      if (++e.since >= e.window) watch(t, cp, e);
      return;
    }
    // Call 0 warms up, untimed (the class's first call pays for pages,
    // workspace and first contacts between peers, whichever plan runs it);
    // then `trials_for(e.bytes)` calls of each candidate, one candidate after another.
    const int n = static_cast<int>(e.candidates.size()), m = trials_for(e.bytes);
    const int k = e.calls++;
    const int i = k == 0 ? 0 : (k - 1) / m;
    const Plan& p = e.candidates[static_cast<std::size_t>(i)];
    // The trial and the agreement after it carry the plan's stamp: a rank
    // still receiving the trial's messages must not see the agreement's as
    // a message of this call under another stamp (a mismatch).
    const call_context cp = with_plan_stamp(c, p);
    std::exception_ptr failed;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      run(p, cp);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (k > 0) {
        const int j = (k - 1) % m;
        e.trial[static_cast<std::size_t>(j)] = s;
        if (j == m - 1) {
          std::array<double, small_trials> sorted = e.trial;
          std::sort(sorted.begin(), sorted.begin() + m);
          e.mine[static_cast<std::size_t>(i)] = sorted[static_cast<std::size_t>(m / 2)];
        }
      }
    } catch (...) {
      failed = std::current_exception();
    }
    // The agreement runs even after a failed trial: a rank that timed out
    // still sends its figures, so the others are not left waiting for them.
    if (e.calls == 1 + n * m) {
      try {
        agree(t, cp, e);
      } catch (...) {
        e.chosen = 0;
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  }

  /// One line per measured class: each candidate's slowest-rank time, the
  /// choice marked; `what` starts the line ("# <what>measured at ..."),
  /// `describe(plan)` names a candidate.
  template <class Describe>
  std::string report(const char* what, Describe&& describe) const {
    std::string s;
    char line[160];
    for (const auto& [k, e] : entries_) {
      if (e.chosen < 0 || e.candidates.size() < 2) continue;
      std::snprintf(line, sizeof line, "# %smeasured at %zu bytes%s", what, e.bytes, e.in_place ? ", in place" : "");
      s += line;
      if (e.measured > 1) {  // again, after a drift (the figures: the last measurement's)
        std::snprintf(line, sizeof line, " (%d times: drift)", e.measured);
        s += line;
      }
      s += ":";
      for (std::size_t j = 0; j < e.candidates.size(); ++j) {
        std::snprintf(line, sizeof line, " %s%s %.1f us%s", static_cast<int>(j) == e.chosen ? "*" : "",
                      describe(e.candidates[j]).c_str(), e.worst[j] * 1e6, j + 1 < e.candidates.size() ? "," : "");
        s += line;
      }
      s += "\n";
    }
    return s;
  }
  /// The plan calls of `bytes` now run: the class's measured choice, else `model`.
  Plan running(std::size_t bytes, bool in_place, const Plan& model) const {
    const auto it = entries_.find(key(bytes, in_place));
    return it != entries_.end() && it->second.chosen > 0
               ? it->second.candidates[static_cast<std::size_t>(it->second.chosen)]
               : model;
  }
  /// How many times the class of `bytes` was measured (0: not yet; more
  /// than 1: again after a drift).
  int measurements(std::size_t bytes, bool in_place) const {
    const auto it = entries_.find(key(bytes, in_place));
    return it != entries_.end() ? it->second.measured : 0;
  }
  void clear() { entries_.clear(); }

 private:
  static unsigned key(std::size_t bytes, bool in_place) {
    unsigned k = 0;
    while (bytes >>= 1) ++k;
    return 2 * k + (in_place ? 1u : 0u);
  }
  // The end of a window: every rank's flag (more than half its calls
  // slow) to every other; if any is up, the class is measured again from
  // its next call (the same candidates, every figure forgotten).
  template <class Transport>
  void watch(Transport& t, const call_context& c, entry& e) {
    const int n = t.size();
    std::vector<std::byte> flags(static_cast<std::size_t>(n));
    flags[static_cast<std::size_t>(t.rank())] = 2 * e.slow > e.since ? std::byte{1} : std::byte{0};
    e.since = e.slow = 0;
    exchange_with_all(t, flags.data(), 1, c, c.base_tag + tag_offset::tuning, "tuning: drift");
    if (std::none_of(flags.begin(), flags.end(), [](std::byte b) { return b != std::byte{0}; })) return;
    e.previous = e.chosen;
    e.chosen = -1;
    e.calls = 0;
    e.mine.fill(std::numeric_limits<double>::infinity());
  }
  template <class Transport>
  void agree(Transport& t, const call_context& c, entry& e) {
    const int n = t.size();
    table_.assign(static_cast<std::size_t>(n) * max_candidates, std::numeric_limits<double>::infinity());
    std::copy(e.mine.begin(), e.mine.end(), table_.begin() + static_cast<std::ptrdiff_t>(t.rank()) * max_candidates);
    exchange_with_all(t, reinterpret_cast<std::byte*>(table_.data()), max_candidates * sizeof(double), c,
                      c.base_tag + tag_offset::tuning, "tuning agreement");
    const int count = static_cast<int>(e.candidates.size());
    slowest_of(table_.data(), n, max_candidates, count, e.worst.data());
    e.chosen = tuning_decision(e.worst.data(), count, margin);
    ++e.measured;
    e.window = e.previous < 0 || e.chosen != e.previous ? drift_window : std::min(2 * e.window, most_window);
  }
  std::map<unsigned, entry> entries_;
  std::vector<double> table_;
  bool follows_ = false;
};

/// `auto_strategy`'s all-reduce choices.
using plan_tuner = measured_choice<plan>;

}  // namespace ddl::detail
