#pragma once
/// \file
/// Broadcast, all-to-all, gather, scatter and reduce between ranks that
/// share stages, through the stages' meetings and no message
/// (`direct_stage_collectives`): the communicator picks them for the sizes
/// the stages hold (`broadcast_choice`, the rooted and all-to-all choices).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddl/strategy/direct/meetings.hpp"

namespace ddl {
namespace detail {

/// The collectives that go through the stages whole: broadcast, all-to-all,
/// gather, scatter and reduce.
class direct_stage_collectives : public direct_meetings {
 public:
  /// Broadcast through the stages' counters (`broadcast_algorithm::direct`,
  /// over stages a transport can wait on: threads, MPI ranks of one
  /// machine). At most `ring_limit` bytes go through the root's ring
  /// (`ring_broadcast`: the root does not wait for its readers). Otherwise the root's `bytes` go in pieces of at most
  /// `flagged_limit`, one meeting (`flagged_meet`) each, in which the root
  /// copies the piece into its slot and every other rank then copies it out
  /// of the root's; the root writes the next piece into its other slot while
  /// the others copy this one. Ranks of one process (`peer_memory`) copy a
  /// message of more than one piece from the root's buffer where it lies,
  /// between two meetings: in the first every rank leaves its buffer's
  /// address in its slot, after the second (every copy done) they return.
  /// Two ranks do the same past the ring, each copying half (`halves`:
  /// threads, or processes that copy to and from each other's memory,
  /// `read_peer`, `write_peer`): the reader copies the first half of the
  /// root's buffer while the root copies the second into the reader's. No
  /// message. Every rank meets every other at each meeting and compares
  /// their stamps (the call's bytes; its tag: root, count, dtype), so ranks
  /// that disagree on the root all fail.
  template <class Transport>
  static void broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, const call_context& c) {
    if (bytes <= ring_limit) return ring_broadcast(t, data, bytes, root, c);
    if (!in_place(t, bytes)) return pieces(t, data, bytes, root, c);
    const bool mine = t.rank() == root;
    std::byte* at[2] = {nullptr, nullptr};  // the root's buffer, a reader's (the other one of two)
    flagged_meet(t, reinterpret_cast<const std::byte*>(&data), sizeof data, bytes, c,
                 [&](int p, const std::byte* slot) { std::memcpy(&at[p == root ? 0 : 1], slot, sizeof at[0]); });
    const std::size_t head = halves(t) ? bytes / 2 / 64 * 64 : bytes;  // what a reader copies
    if constexpr (has_peer_memory_v<Transport>) {
      if (!mine) local_copy(c, data, at[0], head);
      else if (head < bytes) local_copy(c, at[1] + head, data + head, bytes - head);
    } else if constexpr (has_write_peer_v<Transport>) {
      if (!mine) t.read_peer(root, at[0], data, head);
      else t.write_peer(1 - root, data + head, at[1] + head, bytes - head);
    }
    flagged_meet(t, nullptr, 0, bytes, c, [](int, const std::byte*) {});
  }
  /// Whether a `broadcast` of `bytes` (more than `ring_limit`) copies
  /// between the ranks' buffers where they lie, between two meetings: two
  /// ranks always (`halves`), more ranks of one process beyond one piece
  /// (`flagged_limit`). The same answer on every rank.
  template <class Transport>
  static bool in_place(const Transport& t, std::size_t bytes) {
    return halves(t) || (has_peer_memory_v<Transport> && bytes > flagged_limit);
  }
  /// Whether `t` has two ranks that copy to and from each other's buffers:
  /// threads (`peer_memory`), or processes that may (`read_peer`,
  /// `write_peer`, `memory_readable`). A broadcast's copy then runs on both
  /// at once, half each: faster than the stages, the tree, or the reader
  /// reading the whole.
  template <class Transport>
  static bool halves(const Transport& t) {
    if constexpr (has_peer_memory_v<Transport>) return t.size() == 2;
    else if constexpr (has_write_peer_v<Transport>) return t.size() == 2 && t.memory_readable();
    (void)t;
    return false;
  }

  /// A broadcast of at most `ring_limit` bytes through the root's ring, in
  /// entries of `ring_entry` bytes. Every rank numbers the entries it takes
  /// part in, 1, 2, ... (`ring_done_at`: the last it finished, the same on
  /// every rank in step). For entry q the root waits until every peer has
  /// finished entry q - `ring_entries` (whose place q takes; at once unless
  /// the ring is full: the least of its peers' counters it last read, kept
  /// at `ring_seen_at`, tells it without a look at theirs), writes q's
  /// stamp (the call's bytes, its tag, and, up to `ring_inline` bytes, the
  /// data beside it; larger entries' data in the entry) and then its number
  /// q, raises its `ring_pub_at` to q and goes on; a reader waits for the
  /// stamp's number to reach q, checks the stamp against its own and copies
  /// the data out. So a small broadcast costs the root one copy and its
  /// readers one hand-off of a cache line or two, and back-to-back
  /// broadcasts overlap (8 MPI ranks on 2 cores: a meeting of all ranks per
  /// call had every rank wait for every other to be scheduled).
  /// Disagreements: a stamp that differs (count, root, dtype; a reader one
  /// entry out of step) is a `mismatch_error` on the reader; a reader whose
  /// root finished entry q without publishing it (it named another root)
  /// fails at once instead of at its deadline; and two ranks that both
  /// publish entry q as root find each other (each raises its
  /// `ring_pub_at`, then, after a full fence, reads the other's: at least
  /// one of the two sees it), so ranks that disagree on the root never all
  /// return silently. The deadline is read from the clock at the first wait
  /// (a call that never waits reads no clock).
  template <class Transport>
  static void ring_broadcast(Transport& t, std::byte* data, std::size_t bytes, int root, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const bool mine = r == root;
    require_host(c);
    std::byte* own = t.stage(stage_prefix);
    auto* pub = reinterpret_cast<std::uint64_t*>(own + ring_pub_at);
    auto* done = reinterpret_cast<std::uint64_t*>(own + ring_done_at);
    auto* seen = reinterpret_cast<std::uint64_t*>(own + ring_seen_at);
    const std::uint64_t first = __atomic_load_n(done, __ATOMIC_RELAXED) + 1;
    const std::uint64_t last = first + (bytes == 0 ? 0 : (bytes - 1) / ring_entry);
    deadline until{};
    auto by = [&] {
      if (until == deadline{}) until = phase_deadline(c);
      return until;
    };
    auto line = [&](int p, std::size_t at) {
      return reinterpret_cast<const std::uint64_t*>(t.peer_stage(p, stage_header) + at);
    };
    auto load = [](const std::uint64_t* at) { return __atomic_load_n(at, __ATOMIC_ACQUIRE); };
    const std::uint64_t stamp[2] = {bytes, c.base_tag};
    auto disagree = [&](int p, const std::string& why) {
      throw mismatch_error(std::string(c.strategy) + ": " + detail::mismatch_words + detail::describe_tag(c.base_tag) +
                           ": rank " + std::to_string(r) + " and rank " + std::to_string(p) +
                           " disagree on the count, the root or the strategy: " + why);
    };
    for (std::uint64_t q = first; q <= last; ++q) {
      const std::size_t e = static_cast<std::size_t>(q % ring_entries);
      const std::size_t off = static_cast<std::size_t>(q - first) * ring_entry;
      const std::size_t len = std::min(ring_entry, bytes - off);
      const std::size_t at_stamp = ring_stamps_at + ring_stamp * e;
      if (mine) {
        if (q > ring_entries && *seen + ring_entries < q) {  // full as last seen: look at every peer's counter
          std::uint64_t least = q;
          for (int d = 1; d < n; ++d) {
            const int p = (r + d) % n;
            const std::uint64_t* theirs = line(p, ring_done_at);
            if (load(theirs) + ring_entries < q)
              wait_on_peer(t, p, [theirs, q, load] { return load(theirs) + ring_entries >= q; }, by(), c,
                           phase_name{"broadcast ring: peers reading", 0, 1});
            least = std::min(least, load(theirs));
          }
          *seen = least;
        }
        auto* st = reinterpret_cast<std::uint64_t*>(own + at_stamp);
        st[1] = stamp[0];
        st[2] = stamp[1];
        std::byte* to = len <= ring_inline ? own + at_stamp + 24 : own + ring_at + e * ring_entry;
        if (len > 0) local_copy(c, to, data + off, len);
        __atomic_store_n(st, q, __ATOMIC_RELEASE);
        __atomic_store_n(pub, q, __ATOMIC_RELEASE);
      } else {
        const std::uint64_t* their_st = line(root, at_stamp);
        if (load(their_st) < q) {
          const std::uint64_t* their_done = line(root, ring_done_at);
          auto ready = [their_st, their_done, q, load] { return load(their_st) >= q || load(their_done) >= q; };
          wait_on_peer(t, root, ready, by(), c, phase_name{"broadcast ring: the root's entry", 0, 1});
          if (load(their_st) < q)  // its done reached q first: it took part as a reader
            disagree(root, "rank " + std::to_string(r) + " names rank " + std::to_string(root) +
                               " the root, which finished this broadcast without sending it");
        }
        if (load(their_st) != q)  // it published a later entry in this place, not this one
          disagree(root, "rank " + std::to_string(r) + " names rank " + std::to_string(root) +
                             " the root, which did not send this broadcast");
        const std::uint64_t theirs[2] = {their_st[1], their_st[2]};
        check_stamp(r, stamp, root, theirs, size_of(c.red.type), c);
        const std::byte* from = len <= ring_inline ? reinterpret_cast<const std::byte*>(their_st) + 24
                                                   : t.peer_stage(root, stage_prefix) + ring_at + e * ring_entry;
        if (len > 0) local_copy(c, data + off, from, len);
      }
      __atomic_store_n(done, q, __ATOMIC_RELEASE);
      raised(t);
    }
    if (!mine) return;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // this root's counter, then every other's (see above)
    for (int d = 1; d < n; ++d) {
      const int p = (r + d) % n;
      const std::uint64_t theirs = load(line(p, ring_pub_at));
      if (theirs >= first && theirs <= last)
        disagree(p, "both sent this broadcast as its root");
    }
  }

  /// An all-to-all of equal parts of `part` bytes through the stages'
  /// counters (as `broadcast`), in pieces: in each meeting every rank copies
  /// the next `piece` bytes of each of its n parts into its slot (n pieces,
  /// at most `flagged_limit` bytes), then the piece of its own part out of
  /// every rank's slot. No message; in place too (a meeting's pieces are in
  /// the slot before any is written back).
  template <class Transport>
  static void all_to_all(Transport& t, const std::byte* in, std::byte* out, std::size_t part, const call_context& c) {
    const auto n = static_cast<std::size_t>(t.size()), r = static_cast<std::size_t>(t.rank());
    const std::size_t piece = flagged_limit / n;
    std::size_t off = 0;
    do {
      const std::size_t len = std::min(piece, part - off);
      flagged_meet_filled(
          t,
          [&](std::byte* own) {
            for (std::size_t k = 0; k < n; ++k) local_copy(c, own + k * len, in + k * part + off, len);
          },
          n * part, c,
          [&](int p, const std::byte* slot) {
            local_copy(c, out + static_cast<std::size_t>(p) * part + off, slot + r * len, len);
          });
      off += len;
    } while (off < part);
  }

  /// A gather of `part` bytes a rank (at most `flagged_limit`) to `root`
  /// through the stages' counters, one one-way meeting: every rank but the
  /// root copies its part into its slot and leaves, and the root waits for
  /// every peer's and copies it out. The root's own part is copied where it
  /// goes once (not at all in place: `in == out + root * part`).
  template <class Transport>
  static void gather(Transport& t, const std::byte* in, std::byte* out, std::size_t part, int root,
                     const call_context& c) {
    const bool mine = t.rank() == root;
    if (mine && in != out + static_cast<std::size_t>(root) * part)
      local_copy(c, out + static_cast<std::size_t>(root) * part, in, part);
    flagged_meet_filled(
        t, [&](std::byte* own) { if (!mine) local_copy(c, own, in, part); }, part, c,
        [&](int p, const std::byte* slot) {
          if (mine && p != root) local_copy(c, out + static_cast<std::size_t>(p) * part, slot, part);
        },
        mine ? -1 : t.rank());
  }

  /// A scatter of `part` bytes a rank from `root` through the stages'
  /// counters, one one-way meeting (all n parts at most `flagged_limit`):
  /// the root copies every peer's part into its slot and leaves, and every
  /// other rank waits for the root's and copies its own part out.
  template <class Transport>
  static void scatter(Transport& t, const std::byte* in, std::byte* out, std::size_t part, int root,
                      const call_context& c) {
    const auto n = static_cast<std::size_t>(t.size()), r = static_cast<std::size_t>(t.rank());
    const bool mine = t.rank() == root;
    if (mine && out != in + static_cast<std::size_t>(root) * part)
      local_copy(c, out, in + static_cast<std::size_t>(root) * part, part);
    flagged_meet_filled(
        t,
        [&](std::byte* slot) {
          if (mine)
            for (std::size_t k = 0; k < n; ++k)
              if (k != r) local_copy(c, slot + k * part, in + k * part, part);
        },
        part, c,
        [&](int p, const std::byte* slot) {
          if (p == root && !mine) local_copy(c, out, slot + r * part, part);
        },
        root);
  }

  /// A reduce of `count` elements to `root` through the stages' counters,
  /// a one-way meeting (as `gather`) per piece of at most `flagged_limit`
  /// bytes: every rank but the root copies the piece of its input into its
  /// slot and goes on to the next, and the root reduces all n pieces in rank
  /// order into `out` (its own where it lies; `out` may be `in`), as
  /// `one_shot`'s all-reduce does.
  template <class Transport>
  static void reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, int root,
                     const call_context& c) {
    const bool mine = t.rank() == root;
    const std::size_t es = size_of(c.red.type), per = flagged_limit / es;
    if (!c.mem->reduce_many)
      throw invalid_argument(std::string(c.strategy) + ": reduce through the stages needs an n-way reduction "
                             "(memory_ops::reduce_many)");
    std::vector<const std::byte*> sources(mine ? static_cast<std::size_t>(t.size()) : 0);
    for (std::size_t at = 0; at < count; at += per) {
      const std::size_t len = std::min(per, count - at);
      flagged_meet_filled(
          t, [&](std::byte* own) { if (!mine) local_copy(c, own, in + at * es, len * es); }, count * es, c,
          [&](int p, const std::byte* slot) {
            if (mine) sources[static_cast<std::size_t>(p)] = p == root ? in + at * es : slot;
          },
          mine ? -1 : t.rank());
      if (!mine) continue;
      c.mem->reduce_many(c.mem->ctx, out + at * es, sources.data(), t.size(), len, c.red);
      local_finalize(c, out + at * es, len, t.size());
    }
  }

 private:
  // `broadcast` through the root's slots, a piece of `flagged_limit` at a time.
  template <class Transport>
  static void pieces(Transport& t, std::byte* data, std::size_t bytes, int root, const call_context& c) {
    const bool mine = t.rank() == root;
    for (std::size_t off = 0; off < bytes; off += flagged_limit) {
      const std::size_t len = std::min(flagged_limit, bytes - off);
      const std::byte* from = nullptr;
      flagged_meet(t, data + off, mine ? len : 0, bytes, c, [&](int p, const std::byte* slot) {
        if (p == root) from = slot;
      });
      if (!mine) local_copy(c, data + off, from, len);
    }
  }

};

}  // namespace detail
}  // namespace ddl
