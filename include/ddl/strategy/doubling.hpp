#pragma once
/// \file
/// Small- and medium-message all-reduce algorithms: recursive doubling
/// (latency-optimal) and recursive halving-doubling (Rabenseifner). Both take
/// any rank count: with p the largest power of two <= n and rem = n - p, the
/// first 2 rem ranks fold in pairs (the even one hands its data to the odd
/// one and sits out), p ranks run the power-of-two algorithm, and the odd
/// ranks hand the result back — as MPICH and Gloo do.
///
/// Cost model (uniform links B, latency alpha; fold adds 2 (S/B + alpha)
/// when n is not a power of two):
///   recursive doubling:  log2(p) (S / B + alpha)
///   halving-doubling:    2 log2(p) alpha + 2 S (p-1)/p / B
/// Partners are paired nearest first (distance 1, 2, 4, ...), so with ranks
/// numbered innermost-level-first the largest halving step stays inside a node.
///
/// Bit-identical results: partners always combine as (lower rank's value) op
/// (higher rank's value), so both compute the same bits; halving-doubling
/// reduces each block in one place and then only copies.
#include "ddl/strategy/multi_ring.hpp"
#include "ddl/strategy/step.hpp"

namespace ddl {
namespace detail {

/// The fold of a non-power-of-two group: who is active and under which rank.
struct fold_plan {
  int p2 = 1, rem = 0, new_rank = 0;
  explicit fold_plan(int n, int r) {
    while (p2 * 2 <= n) p2 *= 2;
    rem = n - p2;
    if (r < 2 * rem) new_rank = r % 2 == 0 ? -1 : r / 2;
    else new_rank = r - rem;
  }
  int real_rank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

/// Fold step: an even rank among the first 2 rem sends `src` to its odd
/// neighbour, which stores (even's) op (own) into `out`. Returns where this
/// rank's current value now is.
template <class Transport>
const std::byte* fold_in(Transport& t, const fold_plan& f, const std::byte* src, std::byte* out, std::size_t bytes,
                         const call_context& c) {
  const int r = t.rank();
  if (r >= 2 * f.rem) return src;
  step_desc d;
  if (r % 2 == 0) {
    d.send_peer = r + 1;
    d.send = src;
    d.send_bytes = bytes;
  } else {
    d.recv_peer = r - 1;
    d.recv = out;
    d.local = src;
    d.recv_bytes = bytes;
    d.received_first = true;  // the even neighbour is the lower rank
  }
  run_step(t, d, c, c.base_tag + tag_offset::fold, phase_name{"fold", 0, 1});
  return out;
}

/// Unfold step: odd ranks hand the finished result back to their even neighbour.
template <class Transport>
void fold_out(Transport& t, const fold_plan& f, std::byte* out, std::size_t bytes, const call_context& c) {
  const int r = t.rank();
  if (r >= 2 * f.rem) return;
  step_desc d;
  if (r % 2 == 1) {
    d.send_peer = r - 1;
    d.send = out;
    d.send_bytes = bytes;
  } else {
    d.recv_peer = r + 1;
    d.recv = out;
    d.recv_bytes = bytes;
  }
  run_step(t, d, c, c.base_tag + tag_offset::unfold, phase_name{"unfold", 0, 1});
}

/// Bytes of blocks [a, b) of `count` elements over n ranks (`block_of`).
struct block_range {
  std::size_t offset = 0, bytes = 0;
};
inline block_range blocks_between(std::size_t count, int n, int a, int b, std::size_t esize) {
  const block first = block_of(count, n, a), last = block_of(count, n, b - 1);
  return {first.offset * esize, (last.offset + last.size - first.offset) * esize};
}

/// Recursive-halving reduce-scatter for a power-of-two group, blocks in
/// rank order (`block_of`): log2(n) exchanges instead of the ring's n-1,
/// moving the same (n-1) S / n bytes. Each step halves the blocks a rank is
/// responsible for, farthest partner first (distance n/2, ..., 1): it sends
/// the half its partner keeps and reduces the half it keeps; the last step
/// writes its own block into `out` (then the op's final touch, `avg`).
/// `work` holds `count` elements.
template <class Transport>
void halving_reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                            const call_context& c) {
  const int n = t.size(), r = t.rank();
  const std::size_t es = size_of(c.red.type);
  int steps = 0;
  for (int m = 1; m < n; m <<= 1) ++steps;
  const std::byte* cur = in;
  int lo = 0, hi = n, step = 0;
  for (int m = n / 2; m >= 1; m /= 2, ++step) {
    const int mid = lo + m;
    const bool lower = r < mid;
    const block_range keep = blocks_between(count, n, lower ? lo : mid, lower ? mid : hi, es);
    const block_range give = blocks_between(count, n, lower ? mid : lo, lower ? hi : mid, es);
    const bool last = m == 1;
    const int partner = r ^ m;
    step_desc d;
    d.send_peer = d.recv_peer = partner;
    d.send = cur + give.offset;
    d.send_bytes = give.bytes;
    d.recv = last ? out : work + keep.offset;
    d.local = cur + keep.offset;
    d.recv_bytes = keep.bytes;
    d.received_first = partner < r;
    run_step(t, d, c, c.base_tag + tag_offset::halving, phase_name{"halving reduce-scatter", step, steps});
    cur = work;
    if (lower) hi = mid;
    else lo = mid;
  }
  local_finalize(c, out, block_of(count, n, r).size, n);
}

/// Recursive-doubling all-gather for a power-of-two group, blocks in rank
/// order: log2(n) exchanges, nearest partner first, each doubling the blocks
/// a rank holds; the same (n-1) S / n bytes as the ring.
template <class Transport>
void doubling_all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                         const call_context& c) {
  const int n = t.size(), r = t.rank();
  const std::size_t es = size_of(c.red.type);
  const block mine = block_of(count, n, r);
  local_copy(c, out + mine.offset * es, own, mine.size * es);
  int steps = 0;
  for (int m = 1; m < n; m <<= 1) ++steps;
  for (int m = 1, step = 0; m < n; m <<= 1, ++step) {
    const int base = r & ~(m - 1), partner = r ^ m, pbase = partner & ~(m - 1);
    const block_range held = blocks_between(count, n, base, base + m, es);
    const block_range theirs = blocks_between(count, n, pbase, pbase + m, es);
    step_desc d;
    d.send_peer = d.recv_peer = partner;
    d.send = out + held.offset;
    d.send_bytes = held.bytes;
    d.recv = out + theirs.offset;
    d.recv_bytes = theirs.bytes;
    run_step(t, d, c, c.base_tag + tag_offset::doubling, phase_name{"doubling all-gather", step, steps});
  }
}

/// reduce_scatter and all_gather of the all-reduce-only algorithms: the ring's.
struct ring_scatter_gather {
  void validate(int) const {}
  static std::size_t reduce_scatter_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }
  template <class Transport>
  static void reduce_scatter(Transport& t, const std::byte* in, std::byte* work, std::byte* out, std::size_t count,
                             const call_context& c) {
    ring::reduce_scatter(t, in, work, out, count, c);
  }
  template <class Transport>
  static void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count,
                         const call_context& c) {
    ring::all_gather(t, own, out, count, c);
  }
};

}  // namespace detail

/// Recursive doubling: log2(p) exchanges of the whole buffer. Best when the
/// per-step latency dominates (small messages). Each exchange reduces into
/// `out` in place, slice by slice once the slice is sent (chunks land in
/// scratch first: the call's, or a ring of `pipeline_depth` chunks in the
/// workspace on a transport that reduces as it receives); below two chunks
/// there, and on a stream-ordered transport (a device's: nothing lands on
/// the host), it double-buffers through `count` elements of workspace and
/// may copy back once. `reduce_scatter` and `all_gather` use the ring.
struct recursive_doubling : detail::ring_scatter_gather {
  static constexpr const char* name = "recursive_doubling";
  std::string describe() const { return name; }
  static std::size_t all_reduce_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }

  template <class Transport>
  static void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                         const call_context& c) {
    const std::size_t bytes = count * size_of(c.red.type);
    const detail::fold_plan f(t.size(), t.rank());
    const std::byte* cur = detail::fold_in(t, f, in, out, bytes, c);
    const bool lands = !has_fused_reduce_v<Transport> ||
                       (!is_stream_ordered_v<Transport> && bytes > detail::chunk_size(size_of(c.red.type), *c.opts));
    if (f.new_rank >= 0) {
      int step = 0, steps = 0;
      for (int m = 1; m < f.p2; m <<= 1) ++steps;
      for (int mask = 1; mask < f.p2; mask <<= 1, ++step) {
        const int pn = f.new_rank ^ mask, partner = f.real_rank(pn);
        // Reducing into `out` while sending it: chunks land first and each is
        // combined once sent (a transport without a fused reduce always; one
        // with it for a buffer of several chunks, landing in the workspace).
        // Else `out` and the workspace alternate, with a copy back after an
        // odd number of exchanges: a stream-ordered transport, and one chunk,
        // where waiting for the send before combining costs more than a copy.
        const bool over_send = cur == out;
        std::byte* dst = over_send && !lands ? c.work : out;
        call_context lc = c;
        if (has_fused_reduce_v<Transport> && over_send && lands) {
          lc.scratch = c.work;
          lc.scratch_bytes = bytes;
        }
        step_desc d;
        d.send_peer = d.recv_peer = partner;
        d.send = cur;
        d.send_bytes = d.recv_bytes = bytes;
        d.recv = dst;
        d.local = cur;
        d.received_first = pn < f.new_rank;
        run_step(t, d, lc, c.base_tag + tag_offset::exchange, phase_name{"exchange", step, steps});
        cur = dst;
      }
      local_copy(c, out, cur, bytes);
      local_finalize(c, out, count, t.size());
    }
    detail::fold_out(t, f, out, bytes, c);
  }
};

/// Recursive halving-doubling (Rabenseifner): a reduce-scatter by recursive
/// halving, then an all-gather by recursive doubling. The ring's bandwidth
/// term with log2(p) steps instead of p-1. `reduce_scatter` and `all_gather`
/// use the ring.
struct halving_doubling : detail::ring_scatter_gather {
  static constexpr const char* name = "halving_doubling";
  std::string describe() const { return name; }
  static std::size_t all_reduce_workspace(std::size_t, dtype, int) { return 0; }

  template <class Transport>
  static void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                         const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    const detail::fold_plan f(t.size(), t.rank());
    const std::byte* src = detail::fold_in(t, f, in, out, count * es, c);
    if (f.new_rank >= 0) {
      const int p = f.p2;
      int steps = 0;
      for (int m = 1; m < p; m <<= 1) ++steps;
      auto range = [&](int lo, int hi) {  // elements of flat blocks [lo, hi) of count over p
        const std::size_t a = detail::flat_offset(count, p, lo), b = detail::flat_offset(count, p, hi);
        return block{a, b - a};
      };
      // Reduce-scatter by recursive halving: keep the half named by my bit,
      // send the other half, combine what the partner sends for mine.
      int lo = 0, hi = p, step = 0;
      for (int mask = 1; mask < p; mask <<= 1, ++step) {
        const int pn = f.new_rank ^ mask, partner = f.real_rank(pn);
        const int mid = (lo + hi) / 2;
        const bool upper = (f.new_rank & mask) != 0;
        const block keep = upper ? range(mid, hi) : range(lo, mid);
        const block give = upper ? range(lo, mid) : range(mid, hi);
        step_desc d;
        d.send_peer = d.recv_peer = partner;
        d.send = src + give.offset * es;
        d.send_bytes = give.size * es;
        d.recv = out + keep.offset * es;
        d.local = src + keep.offset * es;
        d.recv_bytes = keep.size * es;
        d.received_first = pn < f.new_rank;
        run_step(t, d, c, c.base_tag + tag_offset::halving, phase_name{"halving", step, steps});
        if (upper) lo = mid; else hi = mid;
        src = out;
      }
      const block own = range(lo, hi);
      local_copy(c, out + own.offset * es, src + own.offset * es, own.size * es);
      local_finalize(c, out + own.offset * es, own.size, t.size());
      // All-gather by recursive doubling, retracing the halvings.
      step = 0;
      for (int mask = p >> 1; mask >= 1; mask >>= 1, ++step) {
        const int pn = f.new_rank ^ mask, partner = f.real_rank(pn);
        const int width = hi - lo;
        const bool upper = (f.new_rank & mask) != 0;
        const int plo = upper ? lo - width : hi, phi = upper ? lo : hi + width;
        const block mine = range(lo, hi), theirs = range(plo, phi);
        step_desc d;
        d.send_peer = d.recv_peer = partner;
        d.send = out + mine.offset * es;
        d.send_bytes = mine.size * es;
        d.recv = out + theirs.offset * es;
        d.recv_bytes = theirs.size * es;
        run_step(t, d, c, c.base_tag + tag_offset::doubling, phase_name{"doubling", step, steps});
        lo = std::min(lo, plo);
        hi = std::max(hi, phi);
      }
    }
    detail::fold_out(t, f, out, count * es, c);
  }
};

}  // namespace ddl
