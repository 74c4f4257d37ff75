#pragma once
/// \file
/// The ring (bucket) algorithm: reduce-scatter, then all-gather.
///
/// Cost model (DESIGN §1, the paper's §4.3): with n ranks, S bytes, the
/// slowest link bandwidth B and a per-step latency alpha, each of the
/// 2(n-1) steps moves S/n bytes over every link at once:
///     t_ring(S) = 2 (n-1) (S / (n B) + alpha)
/// Reduce-scatter and all-gather alone are each half of that.
///
/// Memory traffic (what bounds a shared-memory node): a reduce-scatter step
/// reads the peer's slice and the local one and writes the sum (3 S/n per
/// rank), an all-gather step copies (2 S/n), so an all-reduce moves
/// 5 (n-1) S bytes in all, against the 2 n S that any all-reduce must move.
#include <cstring>

#include "../core/buffer.hpp"
#include "partition.hpp"
#include "step.hpp"

namespace ddl {
namespace detail {

/// Ring reduce-scatter over the `count` elements at `in`.
/// Block j of the partition ends fully reduced on rank j: at `own` on this
/// rank; partial blocks pass through `work` (same offsets as `in`, may equal
/// `in`). At step s rank r sends block r-s-1 (its raw input at s = 0, after
/// that the partial it received the step before) to the right, and receives
/// block r-s-2 from the left, combined with its own contribution. Each block
/// is thus reduced along the ring in one fixed order, so the result is the
/// same bits on every rank and every run.
/// \pre `own` does not overlap `in` unless it is `in + offset(rank)`.
template <class Transport>
void ring_reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* own, std::size_t count,
                         const call_context& c, tag tg) {
  const int n = t.size(), r = t.rank();
  const std::size_t es = size_of(c.red.type);
  if (n == 1) {
    if (own != in && count) std::memmove(own, in, count * es);
    return;
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  for (int s = 0; s < n - 1; ++s) {
    const block sb = block_of(count, n, mod(r - s - 1));
    const int rj = mod(r - s - 2);
    const block rb = block_of(count, n, rj);
    step_desc d;
    d.send_peer = right;
    d.send = (s == 0 ? in : work) + sb.offset * es;
    d.send_bytes = sb.size * es;
    d.recv_peer = left;
    d.recv = rj == r ? own : work + rb.offset * es;
    d.local = in + rb.offset * es;
    d.recv_bytes = rb.size * es;
    run_step(t, d, c, tg, phase_name{"reduce-scatter", s, n - 1});
  }
}

/// Ring all-gather: this rank's block (at `own`) ends in place in `out`, and
/// every other block arrives from the left: at step s rank r forwards block
/// r-s and receives block r-s-1. Copies only, so every rank holds the bits
/// the block's owner produced.
template <class Transport>
void ring_all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count, const call_context& c,
                     tag tg) {
  const int n = t.size(), r = t.rank();
  const std::size_t es = size_of(c.red.type);
  const block mine = block_of(count, n, r);
  if (own != out + mine.offset * es && mine.size) std::memmove(out + mine.offset * es, own, mine.size * es);
  if (n == 1) return;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  for (int s = 0; s < n - 1; ++s) {
    const block sb = block_of(count, n, mod(r - s));
    const block rb = block_of(count, n, mod(r - s - 1));
    step_desc d;
    d.send_peer = right;
    d.send = out + sb.offset * es;
    d.send_bytes = sb.size * es;
    d.recv_peer = left;
    d.recv = out + rb.offset * es;
    d.recv_bytes = rb.size * es;
    run_step(t, d, c, tg, phase_name{"all-gather", s, n - 1});
  }
}

}  // namespace detail

/// The ring strategy: all ranks in one ring, 2(n-1) steps.
/// Strategies are empty types with this static interface; the communicator
/// validates arguments and hands them raw, checked pointers.
struct ring {
  static constexpr const char* name = "ring";

  /// Extra bytes this strategy needs for a reduce-scatter that must not
  /// touch its input (partials of other ranks' blocks pass through it).
  static std::size_t reduce_scatter_workspace(std::size_t count, dtype t, int /*ranks*/) {
    return count * size_of(t);
  }

  /// `out = reduce(in)` over all ranks. `in` may equal `out`.
  template <class Transport>
  static void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                         const detail::call_context& c) {
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, t.size(), t.rank());
    std::byte* own = out + mine.offset * es;
    detail::ring_reduce_scatter(t, in, out, own, count, c, c.base_tag);
    host::finalize(own, mine.size, c.red, t.size());
    detail::ring_all_gather(t, own, out, count, c, c.base_tag + 1);
  }

  /// `out` = this rank's block of `reduce(in)`. `work` holds `count`
  /// elements of partials; it may be `in` when the caller allows clobbering.
  template <class Transport>
  static void reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                             const detail::call_context& c) {
    detail::ring_reduce_scatter(t, in, work, out, count, c, c.base_tag);
    host::finalize(out, block_of(count, t.size(), t.rank()).size, c.red, t.size());
  }

  /// `out` (count elements) = every rank's block; this rank's block is at `own`.
  template <class Transport>
  static void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                         const detail::call_context& c) {
    detail::ring_all_gather(t, own, out, count, c, c.base_tag);
  }
};

}  // namespace ddl
