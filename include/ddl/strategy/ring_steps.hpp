#pragma once
/// \file
/// One ring's steps (the multi-ring's dimension, and the ring itself): the
/// reduce-scatter and the all-gather over a group's slices, emitted step by
/// step to a sink (run at once, or collected for a pipelined program).
#include <array>
#include <string>
#include <vector>

#include "ddl/core/buffer.hpp"
#include "ddl/transport/group.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"

namespace ddl::detail {

/// Element offset of flat block `f` of `count` split over `n`.
inline std::size_t flat_offset(std::size_t count, int n, int f) {
  return f >= n ? count : block_of(count, n, f).offset;
}

/// Member j of a ring holds flat blocks [first + j * per, first + (j+1) * per).
struct ring_slices {
  std::size_t count;
  int n;        ///< number of flat blocks
  int first;    ///< first flat block of the range
  int per;      ///< flat blocks per member
  block operator()(int j) const {
    const std::size_t lo = flat_offset(count, n, first + j * per);
    const std::size_t hi = flat_offset(count, n, first + (j + 1) * per);
    return {lo, hi - lo};
  }
};

/// Runs each step of a ring as it is generated (`emit_ring_*` below) and
/// each local copy at once: the blocking form every ring call takes.
struct run_steps_now {
  const call_context& c;
  template <class Group>
  void step(Group& g, const step_desc& d, tag tg, const phase_name& ph) const {
    run_step(g, d, c, tg, ph);
  }
  void copy(std::byte* dst, const std::byte* src, std::size_t bytes) const { local_copy(c, dst, src, bytes); }
};

/// Ring reduce-scatter on group `g` over the slices `part(0..g.size()-1)`
/// (element offsets into `in`, `work`). Slice j ends fully reduced on member
/// j, at `own` on this member; partials pass through `work` (may equal `in`).
/// At step s member r sends slice r-s-1 (its raw input at s = 0, then the
/// partial received the step before) to the right and receives slice r-s-2
/// from the left, combined with its own contribution. Each slice is reduced
/// along the ring in one fixed order: the same bits on every rank, every run.
/// The steps go to `sink.step(g, desc, tag, phase)` in order, a local copy to
/// `sink.copy` (a ring of one).
template <class Group, class Part, class Sink>
void emit_ring_reduce_scatter(Group& g, const Part& part, const std::byte* in, std::byte* work, std::byte* own,
                              std::size_t es, tag tg, const Sink& sink) {
  const int n = g.size(), r = g.rank();
  if (n == 1) {
    const block b = part(0);
    sink.copy(own, in + b.offset * es, b.size * es);
    return;
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  for (int s = 0; s < n - 1; ++s) {
    const block sb = part(mod(r - s - 1));
    const int rj = mod(r - s - 2);
    const block rb = part(rj);
    step_desc d;
    d.send_peer = right;
    d.send = (s == 0 ? in : work) + sb.offset * es;
    d.send_bytes = sb.size * es;
    d.recv_peer = left;
    d.recv = rj == r ? own : work + rb.offset * es;
    d.local = in + rb.offset * es;
    d.recv_bytes = rb.size * es;
    sink.step(g, d, tg, phase_name{"reduce-scatter", s, n - 1});
  }
}

/// Ring all-gather on group `g`: this member's slice (at `own`) lands in
/// place in `out`, every other slice arrives from the left: at step s member
/// r forwards slice r-s and receives slice r-s-1. Copies only.
template <class Group, class Part, class Sink>
void emit_ring_all_gather(Group& g, const Part& part, const std::byte* own, std::byte* out, std::size_t es, tag tg,
                          const Sink& sink) {
  const int n = g.size(), r = g.rank();
  const block mine = part(r);
  sink.copy(out + mine.offset * es, own, mine.size * es);
  if (n == 1) return;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  for (int s = 0; s < n - 1; ++s) {
    const block sb = part(mod(r - s));
    const block rb = part(mod(r - s - 1));
    step_desc d;
    d.send_peer = right;
    d.send = out + sb.offset * es;
    d.send_bytes = sb.size * es;
    d.recv_peer = left;
    d.recv = out + rb.offset * es;
    d.recv_bytes = rb.size * es;
    sink.step(g, d, tg, phase_name{"all-gather", s, n - 1});
  }
}

template <class Group, class Part>
void ring_reduce_scatter(Group& g, const Part& part, const std::byte* in, std::byte* work, std::byte* own,
                         const call_context& c, tag tg) {
  emit_ring_reduce_scatter(g, part, in, work, own, size_of(c.red.type), tg, run_steps_now{c});
}
template <class Group, class Part>
void ring_all_gather(Group& g, const Part& part, const std::byte* own, std::byte* out, const call_context& c, tag tg) {
  emit_ring_all_gather(g, part, own, out, size_of(c.red.type), tg, run_steps_now{c});
}

}  // namespace ddl::detail
