#pragma once
/// \file
/// The multi-dimensional ring (the paper's §4.3) and, as its one-dimensional
/// case, the ring. One code path serves both.
///
/// Ranks form a box d_1 x ... x d_k. Reduce-scatter runs as a ring along the
/// first dimension of the order over the whole buffer, then along the next
/// dimension over the 1/d_1 slice just reduced, and so on; all-gather then
/// retraces the dimensions in reverse. Dimension j moves S / (d_1...d_(j-1))
/// bytes per rank, so the slow outer links see little data.
///
/// Cost model (next to what it models; `cost_model.hpp` evaluates it):
///     t = sum over dimensions j in order of
///         2 (d_j - 1) ( S_j / (d_j B_j) + alpha_j ),   S_j = S / (d_1 ... d_(j-1))
/// where B_j is the per-flow bandwidth of the slowest link a ring of
/// dimension j crosses and alpha_j its per-step latency. With k = 1 this is
/// the ring: 2 (n-1) (S / (n B) + alpha).
///
/// Slices: the buffer is split into n "flat" blocks (`ddl::block_of`). At
/// each dimension the current range is a run of consecutive flat blocks,
/// split evenly among the d_j members, so every slice is contiguous and
/// uneven counts are handled once, by the flat split.
///
/// One ring's steps are in `strategy/ring_steps.hpp`, the box's levels (each
/// dimension's rings for this rank) in `strategy/ring_levels.hpp`.
#include <array>
#include <string>
#include <vector>

#include "ddl/core/buffer.hpp"
#include "ddl/topology/extents.hpp"
#include "ddl/transport/group.hpp"
#include "ddl/strategy/direct.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/pipeline.hpp"
#include "ddl/strategy/ring_levels.hpp"
#include "ddl/strategy/ring_steps.hpp"
#include "ddl/strategy/step.hpp"

namespace ddl {
namespace detail {

/// The multi-ring all-reduce as a sequence of steps, local copies and one
/// finalize (`sink.finalize(data, count)`, the op's final touch on the block
/// this rank owns), in the order they must run on this rank: the pipelined
/// form's program (`collect_stages`); `multi_ring_all_reduce` runs the same
/// sequence blocking.
template <class Transport, class Sink>
void emit_multi_ring_all_reduce(Transport& t, const ring_box& rb, const std::byte* in, std::byte* out,
                                std::size_t count, std::size_t es, tag base, const Sink& sink) {
  auto L = make_levels(t, rb, count);
  // Reduce-scatter, dimension by dimension; level j works on the slice the
  // levels before it left on this rank (in place in `out` after the first).
  const std::byte* src = in;
  for (std::size_t j = 0; j < L.count; ++j) {
    auto& lv = L.at[j];
    const block b = lv.part(lv.group.rank());
    emit_ring_reduce_scatter(lv.group, lv.part, src, out, out + b.offset * es, es,
                             base + tag_offset::ring_reduce_scatter(static_cast<int>(j)), sink);
    src = out;
  }
  const block own = block_of(count, t.size(), L.mine);
  sink.finalize(out + own.offset * es, own.size);
  // All-gather retraces the dimensions in reverse.
  for (std::size_t j = L.count; j-- > 0;) {
    auto& lv = L.at[j];
    const block b = lv.part(lv.group.rank());
    emit_ring_all_gather(lv.group, lv.part, out + b.offset * es, out, es,
                         base + tag_offset::ring_all_gather(static_cast<int>(j)), sink);
  }
}

/// The multi-ring all-reduce, blocking: each level's reduce-scatter in
/// order (a ring, or for the first level of a `direct_first` box the direct
/// form), the finalize, each level's all-gather in reverse. The same
/// sequence of steps `emit_multi_ring_all_reduce` gives the pipelined form.
template <class Transport>
void multi_ring_all_reduce(Transport& t, const ring_box& rb, const std::byte* in, std::byte* out, std::size_t count,
                           const call_context& c) {
  const std::size_t es = size_of(c.red.type);
  auto L = make_levels(t, rb, count);
  const std::byte* src = in;
  for (std::size_t j = 0; j < L.count; ++j) {
    auto& lv = L.at[j];
    const block b = lv.part(lv.group.rank());
    level_reduce_scatter(lv, j == 0 && rb.direct_first, src, out, out + b.offset * es, c,
                         c.base_tag + tag_offset::ring_reduce_scatter(static_cast<int>(j)));
    src = out;
  }
  const block own = block_of(count, t.size(), L.mine);
  local_finalize(c, out + own.offset * es, own.size, t.size());
  for (std::size_t j = L.count; j-- > 0;) {
    auto& lv = L.at[j];
    const block b = lv.part(lv.group.rank());
    level_all_gather(lv, j == 0 && rb.direct_first, out + b.offset * es, out, c,
                     c.base_tag + tag_offset::ring_all_gather(static_cast<int>(j)));
  }
}

/// The multi-ring all-reduce cut into `segments` segments pipelined across
/// its levels (`pipeline.hpp`): while one segment crosses the slow outer
/// rings, the next reduces inside the fast inner ones. Cost model
/// (`cost::price_multi_ring`), with tau_j dimension j's time for S/K bytes:
///     t = sum_j tau_j + (K - 1) max_j tau_j
/// One segment, a transport that cannot run pipelined programs
/// (`can_pipeline_v`) or a `direct_first` box runs the plain multi-ring: the
/// same result. Without
/// a fused receive-and-reduce, `c.work` holds `count` elements.
template <class Transport>
void pipelined_multi_ring_all_reduce(Transport& t, const ring_box& rb, int segments, const std::byte* in,
                                     std::byte* out, std::size_t count, const call_context& c) {
  const int K = pipeline_segments(segments, count, t.size());
  if constexpr (can_pipeline_v<Transport>) {
    if (K > 1 && !rb.direct_first) {
      const std::size_t es = size_of(c.red.type);
      std::vector<std::vector<pipeline_stage>> prog(static_cast<std::size_t>(K));
      for (int k = 0; k < K; ++k) {
        const block seg = block_of(count, K, k);
        emit_multi_ring_all_reduce(t, rb, in + seg.offset * es, out + seg.offset * es, seg.size, es, 0,
                                   collect_stages{&prog[static_cast<std::size_t>(k)]});
      }
      if (prog[0].size() <= max_pipeline_stages) return run_pipelined(t, prog, out, c);
    }
  }
  multi_ring_all_reduce(t, rb, in, out, count, c);
}

/// With `to_rank_order`, moves the flat block this rank holds after a nested
/// reduce-scatter (`nested_index(rank)`, at `src`) to the rank that owns it in
/// `block_of` numbering, receiving its own block into `dst`; without, the
/// reverse (before a nested all-gather). One step of S/n bytes; nothing when
/// the nested order already equals rank order.
template <class Transport>
void permute_blocks(Transport& t, const ring_box& rb, const std::byte* src, std::byte* dst, std::size_t count,
                    bool to_rank_order, const call_context& c, tag tg) {
  const int n = t.size(), r = t.rank();
  const std::size_t es = size_of(c.red.type);
  int send_to = 0, recv_from = 0;
  if (to_rank_order) {  // I hold nested block idx(r); it belongs to rank idx(r). I need block r from q: idx(q) = r
    send_to = nested_index(rb, r);
    for (int q = 0; q < n; ++q)
      if (nested_index(rb, q) == r) recv_from = q;
  } else {  // I hold block r; rank q with idx(q) = r needs it. I need block idx(r) from rank idx(r)
    recv_from = nested_index(rb, r);
    for (int q = 0; q < n; ++q)
      if (nested_index(rb, q) == r) send_to = q;
  }
  const block sb = block_of(count, n, to_rank_order ? send_to : r);
  const block rbk = block_of(count, n, to_rank_order ? r : recv_from);
  if (send_to == r) {
    local_copy(c, dst, src, sb.size * es);
    return;
  }
  step_desc d;
  d.send_peer = send_to;
  d.send = src;
  d.send_bytes = sb.size * es;
  d.recv_peer = recv_from;
  d.recv = dst;
  d.recv_bytes = rbk.size * es;
  run_step(t, d, c, tg, phase_name{"block permutation", 0, 1});
}

template <class Transport>
void multi_ring_reduce_scatter(Transport& t, const ring_box& rb, const std::byte* in, std::byte* work, std::byte* out,
                               std::size_t count, const call_context& c) {
  const std::size_t es = size_of(c.red.type);
  const int n = t.size();
  auto L = make_levels(t, rb, count);
  // Every rank takes part in the permutation step when any rank needs it.
  const bool identity = nested_is_rank_order(rb, n);
  const std::byte* src = in;
  for (std::size_t j = 0; j < L.count; ++j) {
    auto& lv = L.at[j];
    const block b = lv.part(lv.group.rank());
    std::byte* own = (j + 1 == L.count && identity) ? out : work + b.offset * es;
    level_reduce_scatter(lv, j == 0 && rb.direct_first, src, work, own, c,
                         c.base_tag + tag_offset::ring_reduce_scatter(static_cast<int>(j)));
    src = work;
  }
  const block held = block_of(count, n, L.mine);
  std::byte* result = identity ? out : work + held.offset * es;
  local_finalize(c, result, held.size, n);
  if (!identity) permute_blocks(t, rb, result, out, count, true, c, c.base_tag + tag_offset::permute);
}

template <class Transport>
void multi_ring_all_gather(Transport& t, const ring_box& rb, const std::byte* own, std::byte* out, std::size_t count,
                           const call_context& c) {
  const std::size_t es = size_of(c.red.type);
  const int n = t.size();
  if (!nested_is_rank_order(rb, n)) {
    const block dst = block_of(count, n, nested_index(rb, t.rank()));
    permute_blocks(t, rb, own, out + dst.offset * es, count, false, c, c.base_tag + tag_offset::permute);
    own = out + dst.offset * es;
  }
  auto L = make_levels(t, rb, count);
  for (std::size_t j = L.count; j-- > 0;) {
    auto& lv = L.at[j];
    const block b = lv.part(lv.group.rank());
    level_all_gather(lv, j == 0 && rb.direct_first, j + 1 == L.count ? own : out + b.offset * es, out, c,
                     c.base_tag + tag_offset::ring_all_gather(static_cast<int>(j)));
  }
}

}  // namespace detail

/// Natural dimension order: dimension 0 (innermost) first.
struct natural_order {};
/// An explicit order: `dim_order<2, 0, 1>` reduces dimension 2 first.
template <int... P>
struct dim_order {};

/// The multi-dimensional ring over box `Box` (static `ddl::extents<...>` or
/// `ddl::dynamic_extents`), reducing dimensions in `Order`.
/// \tparam Box the box; its size must equal the group's (checked: a static
///         box at construction of the communicator, on every rank)
/// \tparam Order `natural_order` or `dim_order<...>`
/// Example:
/// \code
///   ddl::communicator<ddl::multi_ring<ddl::extents<2, 2, 2>>, ddl::local_transport> comm(t);
///   ddl::multi_ring<ddl::dynamic_extents> mr({4, 2}, {1, 0});   // run-time box and order
/// \endcode
template <class Box, class Order = natural_order>
class multi_ring {
 public:
  static constexpr const char* name = "multi_ring";

  template <class B = Box, std::enable_if_t<std::is_default_constructible_v<B>, int> = 0>
  multi_ring() : rb_(detail::ring_box::natural(dynamic_extents(Box{}))) {
    apply_order(Order{});
  }
  explicit multi_ring(const Box& b) : rb_(detail::ring_box::natural(dynamic_extents(b))) { apply_order(Order{}); }
  /// A run-time order: `order[j]` is the dimension reduced j-th.
  multi_ring(const Box& b, std::initializer_list<int> order) : rb_(detail::ring_box::natural(dynamic_extents(b))) {
    if (order.size() != rb_.box.dims())
      throw topology_error("dimension order has " + std::to_string(order.size()) + " entries for a " +
                           std::to_string(rb_.box.dims()) + "-dimensional box");
    std::size_t j = 0;
    for (int d : order) rb_.order[j++] = d;
    rb_.validate(rb_.box.size());
  }

  /// Throws `topology_error` unless the box holds exactly `ranks` ranks. A
  /// box without dimensions (a default-constructed `dynamic_extents`) becomes
  /// the flat ring over the group.
  void validate(int ranks) {
    if (rb_.box.dims() == 0) {
      const bool direct = rb_.direct_first;
      rb_ = detail::ring_box::natural(dynamic_extents{ranks});
      rb_.direct_first = direct;
    }
    rb_.validate(ranks);
  }
  const detail::ring_box& box() const noexcept { return rb_; }
  /// All-reduce in `segments` segments pipelined across the dimensions
  /// (`detail::pipelined_multi_ring_all_reduce`; 1, the default: the
  /// paper's algorithm, one dimension after another). `auto_strategy`
  /// chooses the count from the cost model. Throws `invalid_argument`
  /// outside 1-24.
  multi_ring& pipelined(int segments) {
    if (segments < 1 || segments > detail::max_pipeline_chunks)
      throw invalid_argument("multi_ring: " + std::to_string(segments) + " pipeline segments (1-" +
                             std::to_string(detail::max_pipeline_chunks) + ")");
    segments_ = segments;
    return *this;
  }
  int segments() const noexcept { return segments_; }
  /// The first dimension in order reduce-scatters and all-gathers through
  /// shared memory, each member reading the others' memory (`one_shot` /
  /// `two_shot`'s direct forms) instead of passing slices round a ring: a
  /// multi-ring whose innermost level is a machine, over a transport whose
  /// ranks of one machine share memory (threads; MPI ranks of one machine,
  /// through their stages, `mpi_transport::stages_shared_among`). A call
  /// whose first-dimension groups cannot read each other's memory throws
  /// `invalid_argument` on every rank. Not pipelined (`pipelined` is then
  /// ignored). `auto_strategy` weighs it where the transport says the
  /// innermost levels share memory (`plan_for::shared_levels`).
  multi_ring& direct_first(bool on = true) {
    rb_.direct_first = on;
    return *this;
  }
  bool is_direct_first() const noexcept { return rb_.direct_first; }
  std::string describe() const {
    return std::string(name) + " " + rb_.str() +
           (segments_ > 1 && !rb_.direct_first ? " pipelined x" + std::to_string(segments_) : "");
  }

  static std::size_t reduce_scatter_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }
  std::size_t all_reduce_workspace(std::size_t count, dtype t, int) const {
    return segments_ > 1 && !rb_.direct_first ? count * size_of(t) : 0;
  }

  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                  const call_context& c) const {
    detail::pipelined_multi_ring_all_reduce(t, rb_, segments_, in, out, count, c);
  }
  template <class Transport>
  void reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                      const call_context& c) const {
    detail::multi_ring_reduce_scatter(t, rb_, in, work, out, count, c);
  }
  template <class Transport>
  void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                  const call_context& c) const {
    detail::multi_ring_all_gather(t, rb_, own, out, count, c);
  }

 private:
  void apply_order(natural_order) {}
  template <int... P>
  void apply_order(dim_order<P...>) {
    static_assert(sizeof...(P) == 0 || Box::dims == sizeof...(P), "ddl: dim_order needs one entry per dimension");
    const int p[] = {P...};
    for (std::size_t j = 0; j < sizeof...(P); ++j) rb_.order[j] = p[j];
    rb_.validate(rb_.box.size());
  }
  detail::ring_box rb_;
  int segments_ = 1;
};

/// The ring: every rank in one ring, 2(n-1) steps. The one-dimensional
/// multi-ring over whatever group it is handed (same code path).
///   t_ring(S) = 2 (n-1) (S / (n B) + alpha)
/// Memory traffic on a shared-memory node: a reduce-scatter step reads the
/// peer's slice and the local one and writes the sum (3 S/n per rank), an
/// all-gather step copies (2 S/n): 5 (n-1) S bytes in all, against the
/// 2 n S any all-reduce must move.
struct ring {
  static constexpr const char* name = "ring";
  void validate(int) const {}
  std::string describe() const { return name; }
  static std::size_t reduce_scatter_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }
  static std::size_t all_reduce_workspace(std::size_t, dtype, int) { return 0; }

  template <class Transport>
  static void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                         const call_context& c) {
    detail::multi_ring_all_reduce(t, flat(t), in, out, count, c);
  }
  template <class Transport>
  static void reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                             const call_context& c) {
    detail::multi_ring_reduce_scatter(t, flat(t), in, work, out, count, c);
  }
  template <class Transport>
  static void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                         const call_context& c) {
    detail::multi_ring_all_gather(t, flat(t), own, out, count, c);
  }

 private:
  template <class Transport>
  static detail::ring_box flat(const Transport& t) {
    return detail::ring_box::natural(dynamic_extents{t.size()});
  }
};

}  // namespace ddl
