#pragma once
/// \file
/// `ddl::auto_strategy`: asks the planner on every call which algorithm fits
/// this message size on this topology, so a small gradient takes recursive
/// doubling and a large one the multi-ring. The topology comes from the
/// constructor, else `DDL_TOPOLOGY`, else one level with the transport's
/// default link costs. With `options::tune_bytes` (`DDL_TUNE`, off by
/// default), all-reduces up to that size settle among the model's close
/// candidates by measuring them, and all-gathers so from 64 KiB (16 KiB on
/// 2 ranks) up to `options::tune_copies_bytes` (`DDL_TUNE_COPIES`; by
/// default every size from there) (`strategy/tuning.hpp`), as are 2-rank
/// all-reduces whose every plan gives the same bits (`detail::order_free`:
/// sums and the like) and, on more ranks, direct all-reduces among the
/// direct plans (one_shot, two_shot and its forms reach the same bits).
#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "ddl/core/memory.hpp"
#include "ddl/strategy/planner.hpp"
#include "ddl/strategy/tuning.hpp"

namespace ddl {

namespace detail {
/// The direct strategies' state (their address tables), for strategies
/// that run them on the planner's word.
struct direct_pair {
  ddl::one_shot one;
  ddl::two_shot two;
  /// two_shot as plan `p` runs it: reading the peers (`plan::reads`), its
  /// stages streamed (`plan::streams`) or neither.
  ddl::two_shot& two_for(const plan& p) { return two.reading_peers(p.reads).streaming_stages(p.streams); }
};

constexpr bool is_direct(const plan& p) { return p.algo == algorithm::one_shot || p.algo == algorithm::two_shot; }

/// Whether every all-reduce plan on `n` ranks gives the same bits for
/// reduction `r`: on 2 ranks each element is one operation on the two
/// inputs, whichever rank's value comes first (the ring puts its own first,
/// the doubling and direct forms the lower rank's), and sum and prod (so avg,
/// which then divides the same sum) commute exactly, in IEEE arithmetic and
/// in integers; min and max do on integers, not on floats (-0 / +0 ties and
/// NaNs keep the first operand). The one difference left: which payload a NaN
/// made of two NaNs carries.
constexpr bool order_free(const reduction& r, int n) {
  if (n != 2) return false;
  if (r.oper != op::min && r.oper != op::max) return true;
  return r.type == dtype::int32 || r.type == dtype::int64;
}

[[noreturn]] inline void no_peer_memory(const plan& p) {
  throw invalid_argument(std::string("plan ") + name_of(p.algo) +
                         " reads peers' buffers; this transport's ranks can neither share nor read them");
}

/// Runs plan `p` (any algorithm) on topology `topo`.
template <class Transport>
void run_plan_all_reduce(Transport& t, const topology& topo, const plan& p, direct_pair& direct, const std::byte* in,
                         std::byte* out, std::size_t count, const call_context& c) {
  switch (p.algo) {
    case algorithm::recursive_doubling: recursive_doubling::all_reduce(t, in, out, count, c); return;
    case algorithm::halving_doubling: halving_doubling::all_reduce(t, in, out, count, c); return;
    case algorithm::multi_ring: pipelined_multi_ring_all_reduce(t, box_of(topo, p), p.segments, in, out, count, c); return;
    case algorithm::one_shot:
    case algorithm::two_shot:
      if constexpr (reaches_peers_v<Transport>) {
        if (p.algo == algorithm::one_shot) direct.one.all_reduce(t, in, out, count, c);
        else direct.two_for(p).all_reduce(t, in, out, count, c);
        return;
      } else {
        no_peer_memory(p);
      }
  }
}

/// Whether reduce-scatter and all-gather after plan `p` take the logarithmic
/// forms (recursive halving, recursive doubling): when the planner chose a
/// doubling all-reduce for the size (per-step latency counts), on a flat
/// group (one level) whose size is a power of two of at least 4. They move
/// the ring's bytes in log2(n) steps instead of n-1.
inline bool logarithmic(const topology& topo, const plan& p, int n) {
  if (p.algo != algorithm::recursive_doubling && p.algo != algorithm::halving_doubling) return false;
  if (n < 4 || (n & (n - 1)) != 0) return false;
  int levels = 0;
  for (std::size_t l = 0; l < topo.count(); ++l) levels += topo[l].extent > 1;
  return levels == 1;
}

/// Reduce-scatter after plan `p`: the direct form when it is a direct
/// strategy (two_shot is a direct reduce-scatter and a direct all-gather),
/// recursive halving when `logarithmic`, else the multi-ring `box`.
template <class Transport>
void run_plan_reduce_scatter(Transport& t, const topology& topo, const plan& p, const ring_box& box,
                             direct_pair& direct, const std::byte* in, std::byte* work, std::byte* out,
                             std::size_t count, const call_context& c) {
  if constexpr (reaches_peers_v<Transport>) {
    if (is_direct(p)) return direct.two_for(p).reduce_scatter(t, in, work, out, count, c);
  }
  if (logarithmic(topo, p, t.size())) return halving_reduce_scatter(t, in, work, out, count, c);
  multi_ring_reduce_scatter(t, box, in, work, out, count, c);
}
/// All-gather after a plan, as `run_plan_reduce_scatter` (recursive doubling
/// when `logarithmic`).
template <class Transport>
void run_plan_all_gather(Transport& t, const topology& topo, const plan& p, const ring_box& box, direct_pair& direct,
                         const std::byte* own, std::byte* out, std::size_t count, const call_context& c) {
  if constexpr (reaches_peers_v<Transport>) {
    if (is_direct(p)) return direct.two_for(p).all_gather(t, own, out, count, c);
  }
  if (logarithmic(topo, p, t.size())) return doubling_all_gather(t, own, out, count, c);
  multi_ring_all_gather(t, box, own, out, count, c);
}
}  // namespace detail

/// Picks the cheapest strategy per call from the cost model.
/// Example:
/// \code
///   ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(t);   // DDL_TOPOLOGY or defaults
///   std::puts(comm.explain(64 << 20).c_str());                             // why it chose what it chose
/// \endcode
class auto_strategy {
 public:
  static constexpr const char* name = "auto";  ///< its name in plans and errors

  /// Topology taken at validation: the transport's own when it knows it (the
  /// simulator's network; CUDA peers' costs per rank, which honour
  /// `DDL_TOPOLOGY` themselves), else `DDL_TOPOLOGY`, else the transport's
  /// default link costs.
  auto_strategy() = default;
  /// A fixed topology; its ranks must match the group's.
  explicit auto_strategy(const topology& t) : topology_(t), given_(true) {}

  /// Takes the group's topology and what its transport allows (once per communicator).
  template <class Transport>
  void validate(const Transport& t) {
    using L = default_link<Transport>;
    if constexpr (has_topology_v<Transport>) {
      if (!given_) topology_ = t.topology();
    } else {
      if (!given_) topology_ = topology::from_env(t.size(), topology::uniform(t.size(), L::bandwidth, L::latency));
    }
    topology_.check(t.size());
    allows_ = plan_for::transport(t);
    allows_.shared_levels = shared_levels(t, topology_);
    plans_ = {};
    tuner_.clear();
    gathers_.clear();
    directs_.clear();
    pairs_.clear();
    scatters_.clear();
  }
  const ddl::topology& topo() const noexcept { return topology_; }  ///< the topology it plans on
  std::string describe() const { return name; }                     ///< its name

  /// The plan for `bytes` per rank (the last few questions' answers are
  /// kept); `in_place` prices the copies an in-place call adds.
  plan choose(std::size_t bytes, candidates which = candidates::all, bool in_place = false) const {
    plan_for q = allows_;
    q.which = which;
    q.in_place = in_place;
    return best_for(bytes, q);
  }
  /// The plan all-reduces of `bytes` with reduction `red` run: the measured
  /// choice once their size class is tuned (`strategy/tuning.hpp`), else the
  /// model's (`choose`). On 2 ranks a reduction whose every plan gives the
  /// same bits (`detail::order_free`: sums and the like) runs the choice
  /// measured among every algorithm, any other (a float min) the one
  /// measured among the direct plans where the model's is direct.
  plan running(std::size_t bytes, bool in_place = false, reduction red = {dtype::float32, op::sum}) const {
    const plan model = choose(bytes, candidates::all, in_place);
    const detail::plan_tuner* same = same_bits_tuner(red, model);
    return tuner_.running(bytes, in_place, same ? same->running(bytes, in_place, model) : model);
  }
  /// Every candidate for `bytes`, best first, with predicted times per
  /// phase; then what was measured so far.
  std::string explain(std::size_t bytes) const {
    auto describe = [&](const plan& p) { return ddl::describe(topology_, p); };
    return ddl::explain(topology_, static_cast<double>(bytes), allows_) + tuner_.report("", describe) +
           directs_.report("", describe) + pairs_.report("", describe) + scatters_.report("reduce-scatter ", describe) +
           gathers_.report("all-gather ", describe);
  }
  /// The plan reduce-scatters of `bytes` (the whole vector) run: the
  /// measured choice once their size class is tuned, else the model's.
  plan running_reduce_scatter(std::size_t bytes, bool in_place = false) const {
    return scatters_.running(bytes, in_place, choose_parts(bytes));
  }
  /// The plan all-gathers of `bytes` (the whole vector) run: the measured
  /// choice once their size class is tuned, else the model's.
  plan running_all_gather(std::size_t bytes, bool in_place = false) const {
    return gathers_.running(bytes, in_place, choose_parts(bytes));
  }

  static std::size_t reduce_scatter_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }
  static std::size_t all_reduce_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }

  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                  const call_context& c) const {
    const std::size_t bytes = count * size_of(c.red.type);
    const plan model = choose(bytes, candidates::all, in == out);
    auto run = [&](const plan& p, const call_context& cp) {
      detail::run_plan_all_reduce(t, topology_, p, direct_, in, out, count, cp);
    };
    if (!detail::plan_tuner::applies(t, c, bytes)) {
      // Among plans that reach the same bits (`same_bits_tuner`), measured
      // as copies are: by default, the result the same whichever runs.
      // Which wins depends on where the ranks' cores lie
      // (`two_shot::streaming_stages`), known only by running.
      if (detail::plan_tuner::applies(t, c, bytes, true)) {
        if (detail::plan_tuner* same = same_bits_tuner(c.red, model)) {
          same->run(t, bytes, in == out, model, c, [&] {
            return same == &pairs_ ? pair_candidates(bytes, model, in == out)
                                   : direct_candidates(bytes, model, in == out);
          }, run);
          return;
        }
      }
      return run(model, detail::with_plan_stamp(c, model));
    }
    plan_for q = allows_;
    q.in_place = in == out;
    tuner_.run(t, bytes, in == out, model, c, [&] {
      return detail::tuning_candidates(topology_, static_cast<double>(bytes), q, detail::plan_tuner::within,
                                       detail::plan_tuner::max_candidates);
    }, run);
  }
  /// Reduce-scatter and all-gather: the direct forms where the planner
  /// picks a direct all-reduce for this size, the logarithmic forms where it
  /// picks a doubling one on a flat power-of-two group (`detail::logarithmic`),
  /// else its best multi-ring. The direct reduce-scatter over stages, from
  /// 64 KiB (16 KiB on 2 ranks), is measured as the all-reduce's two_shot is (`direct_variants`:
  /// its stages cached or streamed, or reading the peers; the same bits
  /// whichever runs), per size class of the whole vector, in place and out
  /// of place apart (every rank must pass the same placement).
  template <class Transport>
  void reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                      const call_context& c) const {
    const std::size_t bytes = count * size_of(c.red.type);
    const plan model = choose_parts(bytes);
    auto run = [&](const plan& p, const call_context& cp) {
      detail::run_plan_reduce_scatter(t, topology_, p, ring_for(p, t.size(), count, cp), direct_, in, work, out,
                                      count, cp);
    };
    // Threads' direct reduce-scatter writes nothing its peers read: streamed is no other form there.
    constexpr bool streams = !has_peer_memory_v<Transport>;
    if (detail::is_direct(model) && has_direct_variants(streams) && count >= static_cast<std::size_t>(t.size()) &&
        detail::plan_tuner::applies(t, c, bytes, true)) {
      scatters_.run(t, bytes, detail::overlaps(out, 1, in, bytes), model, c,
                    [&] { return direct_variants(model, streams); }, run);
      return;
    }
    run(model, c);
  }
  /// All-gathers from 64 KiB (16 KiB on 2 ranks: `plan_tuner::copies_from_for`)
  /// up to `options::tune_copies_bytes` are measured:
  /// one plan of each form they take (`gather_candidates`, `strategy/tuning.hpp`).
  template <class Transport>
  void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                  const call_context& c) const {
    const std::size_t bytes = count * size_of(c.red.type);
    const plan model = choose_parts(bytes);
    auto run = [&](const plan& p, const call_context& cp) {
      const ring_box box = p.algo == algorithm::multi_ring ? box_of(topology_, p) : ring_for(p, t.size(), count, cp);
      detail::run_plan_all_gather(t, topology_, p, box, direct_, own, out, count, cp);
    };
    // Tuned per placement, which every rank must then share (as with
    // `MPI_IN_PLACE`); not below one element per rank, where a rank's empty
    // part says nothing of its placement.
    if (!detail::plan_tuner::applies(t, c, bytes, true) || count < static_cast<std::size_t>(t.size()))
      return run(model, c);
    const bool in_place = detail::overlaps(own, 1, out, bytes);
    gathers_.run(t, bytes, in_place, model, c, [&] { return gather_candidates(bytes, t.size()); }, run);
  }

 private:
  using ring_box = detail::ring_box;
  // The plan a reduce-scatter or all-gather of `bytes` follows: the
  // all-reduce's, priced without the transport's whole two_shot call
  // (`flagged_two_shot` runs all-reduces only) and without pushed blocks
  // (`two_shot_pushes_v`: all-reduces only).
  plan choose_parts(std::size_t bytes) const { return best_for(bytes, parts_question()); }
  plan_for parts_question() const {
    plan_for q = allows_;
    q.two_shot_one_round = false;
    q.two_shot_pushes = false;
    return q;
  }
  // Where all-reduces with reduction `red` whose model plan is `model` are
  // measured when `DDL_TUNE` leaves them (among plans that reach the same
  // bits, so by default, as copies are), or null: on 2 ranks, where every
  // plan reaches the same bits for `red` (`detail::order_free`), among the
  // algorithms themselves (`pairs_`: which wins moves with where the two
  // cores lie, as the forms' does); else, for a direct model, among the
  // direct plans (`directs_`, `direct_candidates`: one_shot and two_shot's
  // forms both reduce every element once, over the ranks' inputs in rank
  // order, `memory_ops::reduce_many`).
  detail::plan_tuner* same_bits_tuner(const reduction& red, const plan& model) const {
    if (detail::order_free(red, topology_.size())) return &pairs_;
    if (detail::is_direct(model)) return &directs_;
    return nullptr;
  }
  // A direct all-reduce's measured candidates: the model's plan and
  // two_shot's forms (`direct_variants`), with the other direct algorithm
  // second where the model prices it within `plan_tuner::within` of its
  // plan: where the model's crossover between them lies within its error
  // (near it either may win, by run).
  // The tuner keeps the first
  // `max_candidates`; fewer than two: the model runs.
  std::vector<plan> direct_candidates(std::size_t bytes, const plan& model, bool in_place) const {
    std::vector<plan> v = direct_variants(model);
    plan_for q = allows_;
    q.in_place = in_place;
    for (const plan& p : all_plans(topology_, static_cast<double>(bytes), q))
      if (detail::is_direct(p) && p.algo != model.algo && !p.reads && !p.streams) {
        if (p.seconds <= detail::plan_tuner::within * model.seconds) v.insert(v.begin() + 1, p);
        break;
      }
    return v;
  }
  // `model` (a direct plan), then two_shot reading the peers' memory and
  // two_shot with its stages streamed (unless not `streams`) where the
  // transport allows them: the forms a direct all-reduce or reduce-scatter
  // is measured among.
  bool has_direct_variants(bool streams = true) const noexcept {
    return allows_.reads_memory || (streams && allows_.streams_stages);
  }
  std::vector<plan> direct_variants(const plan& model, bool streams = true) const {
    std::vector<plan> v{model};
    for (bool reading : {true, false}) {
      if (!(reading ? allows_.reads_memory : streams && allows_.streams_stages)) continue;
      plan other = model;
      other.algo = algorithm::two_shot;  // a direct reduce-scatter is two_shot's whichever the plan
      (reading ? other.reads : other.streams) = true;
      v.push_back(other);
    }
    return v;
  }
  // A 2-rank all-reduce's measured candidates: the model's plan and its
  // forms (`direct_variants`), then one plan of each other algorithm,
  // cheapest first, a two_shot followed by its forms (the streamed form is
  // priced above the rest, measured, never modelled; where the cores lie far
  // apart it beats the model's ring). On 2 ranks
  // halving-doubling sends the ring's two messages, so only one of them is
  // measured. The tuner keeps the first `max_candidates`.
  std::vector<plan> pair_candidates(std::size_t bytes, const plan& model, bool in_place) const {
    std::vector<plan> v;
    auto algo = [](const plan& p) { return p.algo == algorithm::halving_doubling ? algorithm::multi_ring : p.algo; };
    auto add = [&](const plan& p) {
      const auto forms = p.algo == algorithm::two_shot ? direct_variants(p) : std::vector<plan>{p};
      for (const plan& f : forms)
        if (std::none_of(v.begin(), v.end(), [&](const plan& o) {
              return algo(o) == algo(f) && o.reads == f.reads && o.streams == f.streams;
            }))
          v.push_back(f);
    };
    add(model);
    plan_for q = allows_;
    q.in_place = in_place;
    for (const plan& p : all_plans(topology_, static_cast<double>(bytes), q)) add(p);
    return v;
  }
  // An all-gather's measured candidates: the model's plan, then the model's
  // best of each other form an all-gather takes on `n` ranks (the direct
  // form through the stages, the same with the stages streamed, the direct
  // form reading the peers' memory where the ranks can, the doubling form,
  // the multi-ring), each form
  // once whatever it is priced at: one_shot and two_shot gather alike, as
  // recursive doubling and halving-doubling do, and the all-reduce prices
  // that rank them count the reduction too (on 2 MPI ranks the ring,
  // priced well above the direct form's all-reduce, gathered faster where
  // the host placed the cores apart).
  std::vector<plan> gather_candidates(std::size_t bytes, int n) const {
    auto form = [&](const plan& p) {
      return detail::is_direct(p) ? (p.reads ? 3 : p.streams ? 4 : 0) : detail::logarithmic(topology_, p, n) ? 1 : 2;
    };
    std::vector<plan> v{choose_parts(bytes)};
    bool seen[5] = {false, false, false, false, false};
    seen[form(v.front())] = true;
    for (const plan& p : all_plans(topology_, static_cast<double>(bytes), parts_question()))
      if (!seen[form(p)]) {
        seen[form(p)] = true;
        v.push_back(p);
      }
    return v;
  }
  // `best_plan` for `bytes` under `q`, from the last `plan_cache` answers
  // when one matches: a reduce-scatter asks twice per call (its plan, then
  // its multi-ring), and calls alternate in place and out of place.
  plan best_for(std::size_t bytes, const plan_for& q) const {
    for (const cached_plan& e : plans_)
      if (e.bytes == bytes && e.asked == q) return e.answer;
    cached_plan& e = plans_[oldest_];
    oldest_ = (oldest_ + 1) % plans_.size();
    e.answer = best_plan(topology_, static_cast<double>(bytes), q);
    e.bytes = bytes;
    e.asked = q;
    return e.answer;
  }
  // The multi-ring box for a reduce-scatter or all-gather after plan `p`
  // (none needed when `p` runs a direct or logarithmic form).
  ring_box ring_for(const plan& p, int n, std::size_t count, const call_context& c) const {
    if (detail::is_direct(p) || detail::logarithmic(topology_, p, n)) return ring_box{};
    return box_of(topology_, choose(count * size_of(c.red.type), candidates::multi_ring_only));
  }
  ddl::topology topology_;
  bool given_ = false;
  plan_for allows_{};  // what the transport allows (set by `validate`)
  mutable detail::direct_pair direct_;
  mutable detail::plan_tuner tuner_;
  // The choices among forms that give the same bits follow drift
  // (`measured_choice(true)`): which is fastest moves with where the
  // ranks' cores lie.
  mutable detail::plan_tuner gathers_{true};   // all-gathers' measured choices
  mutable detail::plan_tuner scatters_{true};  // direct reduce-scatters' measured choices
  mutable detail::plan_tuner directs_{true};  // direct all-reduces untuned otherwise: one_shot, two_shot and its forms
  mutable detail::plan_tuner pairs_{true};  // 2-rank all-reduces untuned otherwise: every plan (`detail::order_free`)
  struct cached_plan {
    std::size_t bytes = ~std::size_t{0};  // none
    plan_for asked{};
    plan answer{};
  };
  static constexpr std::size_t plan_cache = 4;
  mutable std::array<cached_plan, plan_cache> plans_{};
  mutable std::size_t oldest_ = 0;
};

/// Runs one given plan (e.g. an entry of `all_plans`) on its topology: what
/// `auto_strategy` would run had the planner chosen it. `reduce_scatter` and
/// `all_gather` run the plan's multi-ring (for doubling plans the
/// logarithmic forms on a flat power-of-two group, else the flat ring; the
/// direct forms for direct plans).
/// Example:
/// \code
///   for (const ddl::plan& p : ddl::all_plans(topo, bytes))
///     ddl::communicator<ddl::planned, T> comm(t, ddl::planned(topo, p));
/// \endcode
class planned {
 public:
  static constexpr const char* name = "planned";  ///< its name in errors
  /// Runs plan `p` on topology `t`.
  planned(const topology& t, const plan& p) : topology_(t), plan_(p) {}
  void validate(int ranks) const { topology_.check(ranks); }                ///< `t` must have `ranks` ranks
  std::string describe() const { return ddl::describe(topology_, plan_); }  ///< the plan, as `explain` says it
  const plan& which() const noexcept { return plan_; }                      ///< the plan it runs

  static std::size_t reduce_scatter_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }
  std::size_t all_reduce_workspace(std::size_t count, dtype t, int) const {
    const bool needs = plan_.algo == algorithm::recursive_doubling || plan_.algo == algorithm::one_shot ||
                       (plan_.algo == algorithm::multi_ring && plan_.segments > 1);
    return needs ? count * size_of(t) : 0;
  }
  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                  const call_context& c) const {
    detail::run_plan_all_reduce(t, topology_, plan_, direct_, in, out, count, c);
  }
  template <class Transport>
  void reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                      const call_context& c) const {
    detail::run_plan_reduce_scatter(t, topology_, plan_, ring_box(), direct_, in, work, out, count, c);
  }
  template <class Transport>
  void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                  const call_context& c) const {
    detail::run_plan_all_gather(t, topology_, plan_, ring_box(), direct_, own, out, count, c);
  }

 private:
  detail::ring_box ring_box() const {
    if (plan_.algo == algorithm::multi_ring) return box_of(topology_, plan_);
    return detail::ring_box::natural(dynamic_extents{topology_.size()});
  }
  topology topology_;
  plan plan_;
  mutable detail::direct_pair direct_;
};

}  // namespace ddl
