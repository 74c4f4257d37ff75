#pragma once
/// \file
/// A multi-ring's levels: the box with its reduction order (`ring_box`),
/// where each dimension's rings sit for this rank and which slices they
/// reduce, each level's reduce-scatter and all-gather (a ring, or the
/// direct form on the first level of a `direct_first` box), and the flat
/// block a rank ends with.
#include <array>
#include <string>
#include <vector>

#include "ddl/core/buffer.hpp"
#include "ddl/topology/extents.hpp"
#include "ddl/transport/group.hpp"
#include "ddl/strategy/direct.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/strategy/ring_steps.hpp"

namespace ddl::detail {

struct ring_box {
  dynamic_extents box;
  std::array<int, max_dims> order{};  ///< order[j] = dimension reduced j-th
  /// The first dimension in order reduce-scatters and all-gathers through
  /// shared memory (the direct forms of `direct.hpp`) instead of a ring:
  /// its groups must share memory (`peers_reachable`), e.g. one machine.
  bool direct_first = false;

  static ring_box natural(const dynamic_extents& b) {
    ring_box rb{b, {}, false};
    for (std::size_t d = 0; d < b.dims(); ++d) rb.order[d] = static_cast<int>(d);
    return rb;
  }
  std::string str() const {
    std::string s = box.str();
    bool natural = true;
    for (std::size_t j = 0; j < box.dims(); ++j) natural = natural && order[j] == static_cast<int>(j);
    if (!natural) {
      s += " order ";
      for (std::size_t j = 0; j < box.dims(); ++j) s += (j ? "," : "") + std::to_string(order[j]);
    }
    if (direct_first) s += " direct-first";
    return s;
  }
  void validate(int ranks) const {
    check_box(box, ranks);
    std::array<bool, max_dims> seen{};
    for (std::size_t j = 0; j < box.dims(); ++j) {
      const int d = order[j];
      if (d < 0 || d >= static_cast<int>(box.dims()) || seen[d])
        throw topology_error("dimension order of box " + box.str() + " is not a permutation of its dimensions");
      seen[d] = true;
    }
  }
};

/// Where one dimension's rings sit for this rank.
template <class Transport>
struct ring_level {
  group_view<Transport> group;
  ring_slices part;
};

/// This rank's group and slices along each dimension, in reduction order,
/// and the flat block it owns after the nested reduce-scatter.
template <class Transport>
struct ring_levels {
  std::array<ring_level<Transport>, max_dims> at{};
  std::size_t count = 0;
  int mine = 0;
};

/// Over processes that map each other's device memory (`device_peers_among`),
/// a `direct_first` box whose first dimension has a group that is not all
/// near: an `invalid_argument` on every rank, before any message (the
/// answer is the same everywhere), so the near groups do not reduce and
/// then wait at the next level for ranks that refused.
template <class Transport>
void check_direct_first(const Transport& t, const ring_box& rb) {
  if constexpr (device_peers_only_v<Transport> && has_device_peers_among<Transport>::value) {
    if (!rb.direct_first || rb.box.dims() == 0) return;
    const int d = rb.order[0], e = rb.box.extent(d), stride = rb.box.stride(d);
    for (int q = 0; q < t.size(); ++q)
      if (coord_of(rb.box, q)[d] == 0 && !t.device_peers_among(q, stride, e))
        throw invalid_argument("multi_ring direct-first: the processes of its first dimension do not all map each "
                               "other's device memory (ranks " + std::to_string(q) + " to " +
                               std::to_string(q + (e - 1) * stride) + " step " + std::to_string(stride) +
                               "; CUDA IPC: one host; DDL_CUDA_IPC=0 turns it off); use the plain multi_ring");
  } else {
    (void)t, (void)rb;
  }
}

template <class Transport>
ring_levels<Transport> make_levels(Transport& t, const ring_box& rb, std::size_t count) {
  check_direct_first(t, rb);
  const int n = t.size();
  const coord me = coord_of(rb.box, t.rank());
  ring_levels<Transport> L;
  int first = 0, per = n;
  for (std::size_t j = 0; j < rb.box.dims(); ++j) {
    const int d = rb.order[j];
    const int e = rb.box.extent(d), stride = rb.box.stride(d);
    per /= e;
    L.at[j] = ring_level<Transport>{group_view<Transport>(t, t.rank() - me[d] * stride, stride, e),
                                    ring_slices{count, n, first, per}};
    first += me[d] * per;
  }
  L.count = rb.box.dims();
  L.mine = first;
  return L;
}

/// The first dimension of a `direct_first` box: its reduce-scatter and
/// all-gather read the group members' memory (`direct_base`'s forms over
/// the level's slices, which cover the whole buffer: a staged transport,
/// MPI, copies the input into its stage as two_shot does; processes that
/// map each other's device memory read it where it lies), synchronised by
/// messages on the group. Throws `invalid_argument` (on every member alike)
/// where the group cannot read each other's memory. Its messages carry the
/// direct strategies' tags (`tag_offset::addresses` 1, `call_done` 3 on the
/// call's base tag), not the level's `tg`: they share offsets only with
/// level 0's ring tags (`ring_reduce_scatter(0)` 0, `ring_all_gather(0)` 1),
/// and level 0 is the direct one, which runs no ring; the other levels'
/// start at 4.
template <class Group, class Run>
void direct_level(Group& g, Run&& run) {
  if constexpr (reaches_peers_v<Group>) {
    if (!peers_reachable(g))
      throw invalid_argument("multi_ring direct-first: the ranks of its first dimension cannot read each other's "
                             "memory (MPI: not one machine, shared memory refused, or DDL_MPI_SHM=0); use the "
                             "plain multi_ring");
    direct_base d;
    run(d);
  } else if constexpr (has_device_peers_v<Group>) {  // processes that map each other's device memory
    if (!g.device_peers())
      throw invalid_argument("multi_ring direct-first: the processes of its first dimension do not all map each "
                             "other's device memory (CUDA IPC: one host; DDL_CUDA_IPC=0 turns it off); use the "
                             "plain multi_ring");
    direct_base d;
    run(d);
  } else {
    (void)g, (void)run;
    throw invalid_argument("multi_ring direct-first: this transport's ranks can neither share nor read each "
                           "other's memory; use the plain multi_ring");
  }
}

/// Level j's reduce-scatter: a ring, or the direct form (`direct_level`)
/// for the first level of a `direct_first` box.
template <class Transport>
void level_reduce_scatter(ring_level<Transport>& lv, bool direct, const std::byte* src, std::byte* work,
                          std::byte* own, const call_context& c, tag tg) {
  if (!direct) return ring_reduce_scatter(lv.group, lv.part, src, work, own, c, tg);
  direct_level(lv.group, [&](auto& d) { d.reduce_scatter_parts(lv.group, lv.part, src, own, lv.part.count, c); });
}
/// Level j's all-gather, as `level_reduce_scatter`.
template <class Transport>
void level_all_gather(ring_level<Transport>& lv, bool direct, const std::byte* own, std::byte* out,
                      const call_context& c, tag tg) {
  if (!direct) return ring_all_gather(lv.group, lv.part, own, out, c, tg);
  direct_level(lv.group, [&](auto& d) { d.all_gather_parts(lv.group, lv.part, own, out, lv.part.count, c); });
}

/// The flat block a rank ends with after a nested reduce-scatter.
inline int nested_index(const ring_box& rb, int rank) {
  const coord c = coord_of(rb.box, rank);
  int idx = 0;
  for (std::size_t j = 0; j < rb.box.dims(); ++j) idx = idx * rb.box.extent(rb.order[j]) + c[rb.order[j]];
  return idx;
}

/// True when the nested order equals rank order on every rank.
inline bool nested_is_rank_order(const ring_box& rb, int n) {
  for (int q = 0; q < n; ++q)
    if (nested_index(rb, q) != q) return false;
  return true;
}

}  // namespace ddl::detail
