#pragma once
/// \file
/// Direct collectives for ranks that can read each other's memory: their
/// buffers in place (a transport with `peer_memory`: threads of one
/// process), or stages they share (`peer_stage`: MPI ranks of one machine;
/// each rank first copies into its stage what its peers will read, and they
/// read it from there). Instead of passing slices around a ring, a rank
/// reads what it needs straight out of its peers' memory, all n at once:
///
///  * `ddl::one_shot` all-reduce: every rank reads every rank's whole input
///    and reduces it itself. Least latency: for small messages. Up to
///    `one_shot::stage_limit` bytes (in place; less out of place) each rank
///    first copies its input into its stage (two slots, one per call in
///    turn, allocated once) and the call is one synchronisation: the
///    address exchange, after which every rank reads the stages and writes
///    its own result; (n+2) S bytes of memory traffic per rank. Above the
///    limit, or when the ranks' stages
///    are not in step (the first call, after an error), it reads the inputs
///    themselves and needs a second synchronisation before any rank may
///    return; (n+1) S bytes. In place the result goes through the
///    workspace: over threads segment by segment through a few slots that
///    stay in cache, each copied to the buffer once every peer has read it
///    (`one_shot::all_reduce_landed`), elsewhere whole, 2 S more.
///    Over shared stages a transport can wait on (`wait_until`: threads, MPI
///    ranks of one machine) a call of up to `flagged_limit` bytes sends no
///    message at all, and goes before both: each rank copies its input into
///    a slot of its stage and raises a counter there, waits for its peers'
///    counters, checks their calls' stamps against its own and reduces their
///    slots (`all_reduce_flagged`); 0.6 us for 2 MPI ranks at 8 B where
///    `MPI_Allreduce` takes 1.6, 5.1 us for 4 threads at 4 KiB where the
///    above took 10.2 (bench/results/mpi-vs-openmpi-mpich-gloo.md,
///    shared-memory.md, 2026-11-25). The direct reduce-scatter and
///    all-gather take the same round up to that size. A transport may run
///    such a call itself (`flagged_all_reduce`: CUDA ranks, one kernel each,
///    spinning on counters in device memory; up to its `flagged_bytes`).
///  * `ddl::two_shot` all-reduce: rank j reduces block j (`ddl::block_of`)
///    reading block j of all n inputs at once (a direct reduce-scatter), then
///    every rank copies each reduced block from its owner (a direct
///    all-gather). Three synchronisations; (3n-1) S / n bytes per rank, where
///    the ring moves 5 (n-1) S / n: for large messages. Through stages add
///    2 (n+1) S / n (the copy in, the reduced block copied out for the
///    peers), in segments of `stage_segment` so that the stage
///    stays in cache; over MPI that still beats its messages, each a kernel
///    copy between processes at a quarter of memcpy's rate here
///    (bench/results/mpi-vs-openmpi-mpich-gloo.md).
///    A transport may run the whole all-reduce itself (`flagged_two_shot`:
///    CUDA ranks, one kernel each, the three synchronisations through
///    counters in device memory, no message; any size).
///  * `reduce_scatter` and `all_gather` (both strategies): the direct forms,
///    one synchronisation each besides the address exchange. Their
///    message-synchronised cores take any partition into one contiguous part
///    per rank (`reduce_scatter_parts`, `all_gather_parts`): a multi-ring's
///    first level runs through them over its slices (`multi_ring::direct_first`).
///
/// Over stages, a buffer that lies in a `ddl::shared_buffer`
/// (transport/shared_buffer.hpp) is read where it lies, as over
/// `peer_memory`, not copied into the stage: each rank says in the address
/// exchange where its `in` and `out` lie (`addresses::in_at`, `out_at`),
/// and its peers map them (`peer_buffer`) or read its stage, per rank and
/// per buffer. two_shot then moves (3n-1) S / n bytes per rank over MPI
/// too; one_shot in place still stages (its result would overwrite what
/// its peers read).
///
/// `two_shot::reading_peers()`, over stages whose ranks also copy from any
/// address of each other's process (`memory_readable`, `read_peer`: MPI
/// ranks of one machine where the kernel allows cross-memory attach): above
/// `flagged_limit` nothing goes through the stages; two_shot, the direct
/// reduce-scatter and the direct all-gather copy their peers' plain buffers
/// where they lie, whole, no segments: a reduction reads its peers' parts
/// `read_piece` bytes at a time into a buffer that stays in cache and
/// reduces from there, a gather copies each peer's part straight into its
/// place. Three synchronisations per call where the segments take three per
/// segment, but each read is a system call that pins the peer's pages. On
/// this project's 2-core VM, 2 Open MPI ranks in place, it ran 1.1x and
/// 1.3x faster than the stages at 2 and 16 MiB, and slower at 4 and 8 ranks
/// and at 128 MiB (bench/results/mpi-vs-openmpi-mpich-gloo.md, 2026-11-28
/// (night)): `auto` measures both (`plan::reads`).
///
/// `two_shot::streaming_stages()` writes the stages with streaming stores
/// (`memory_ops::stream_copy`), so that a write need not first take each
/// line back from the peer's cache that read it last: 3-4x faster where the
/// ranks' cores lie far apart, 1.3x slower where they share a cache; `auto`
/// measures it too (`plan::streams`).
///
/// Synchronisation is by messages over the transport, so group views and
/// the transport's deadlines, aborts and error messages all apply: ranks
/// trade buffer addresses (one small message to every peer), and zero-byte
/// messages to every peer mark the end of a phase, so no rank overwrites a
/// block or returns while a peer may still read it.
///
/// Bit-identical results: one_shot combines rank 0's value, then rank 1's,
/// ... on every rank (`memory_ops::reduce_many`); two_shot reduces each block
/// once, on its owner, in that same order, and the others copy it.
///
/// Cost model (`cost::price_direct`, calibrated in
/// bench/results/shared-memory.md): with M the memory bandwidth one rank
/// gets and sigma one synchronisation round,
///     one_shot: 2 sigma + (n+1) S / M          two_shot: 3 sigma + (3n-1) S / (n M)
/// one_shot through its stage is one round, not two, but a round that waits
/// on every peer costs about two steps that wait on one (4 threads on 2
/// cores: one round 10.5 us, recursive doubling's two exchanges 6-9 us), so
/// it keeps the price of two.
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

#include "ddl/core/error.hpp"
#include "ddl/strategy/partition.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/transport/concept.hpp"
#include "ddl/transport/stamp.hpp"

namespace ddl {
namespace detail {

/// What the direct strategies share: the address table, the checks, and the
/// direct reduce-scatter and all-gather.
class direct_base {
 public:
  /// How a stage is laid out (over `peer_stage`): first `stage_header`
  /// bytes of counters and stamps, a cache line each: the flagged calls'
  /// counter and the stamps of their two slots (lines 0-2), the broadcast
  /// ring's `ring_pub_at` and `ring_done_at` (lines 3, 4), `ring_seen_at`
  /// (line 5, read by this rank alone) and its entries' stamps (from
  /// `ring_stamps_at`, `ring_stamp` bytes each: 24 of stamp, then up to
  /// `ring_inline` bytes of the entry's data); then the flagged calls' two
  /// slots of `flagged_limit` bytes, then the ring's `ring_entries` entries of
  /// `ring_entry` bytes (at `ring_at`), then from `stage_prefix` on the data
  /// of the calls synchronised by messages. Slots and entries are read by
  /// peers that may still be in a call when this rank has left it, so
  /// nothing else is written there.
  static constexpr std::size_t stage_header = 4096;
  static constexpr std::size_t flagged_limit = std::size_t{64} << 10;
  /// A broadcast of at most `ring_limit` bytes goes through the root's ring
  /// of `ring_entries` entries (`ring_broadcast`): the root writes and goes
  /// on, up to `ring_entries` entries ahead of its slowest reader; entries of
  /// at most `ring_inline` bytes ride in the stamp's own cache lines (3-8
  /// MPI ranks on 2 cores, 8-64 B: 1.2-2x faster than from the entry). At 2
  /// ranks, 8 B-4 KiB, over one meeting of both a call: 1.4-2.7x faster back
  /// to back, 0.9-1.1x a call between barriers (ranks that leave a meeting
  /// together pass a barrier at once; bench/results/mpi-vs-openmpi-mpich-gloo.md,
  /// 2026-12-03).
  /// At 32 KiB (8 entries) the ring ran 1.1-2.4x slower than one meeting
  /// back to back at 3 and 4 ranks; at 16 KiB 1.4-2.4x faster at 4 and 8.
  /// 28 entries (as many stamps as the header holds) over 16: back to back
  /// at 3-8 MPI ranks, 8-64 B, `MPI_Bcast` / ddl 1.0-1.25x higher (the root runs
  /// further ahead before it waits for its readers to be scheduled).
  static constexpr std::size_t ring_entries = 28;
  static constexpr std::size_t ring_entry = std::size_t{4} << 10;
  static constexpr std::size_t ring_limit = 4 * ring_entry;
  static constexpr std::size_t ring_pub_at = 64 * 3, ring_done_at = 64 * 4, ring_seen_at = 64 * 5;
  static constexpr std::size_t ring_stamps_at = 64 * 8, ring_stamp = 128, ring_inline = ring_stamp - 24;
  static constexpr std::size_t ring_at = stage_header + 2 * flagged_limit;
  static constexpr std::size_t stage_prefix = ring_at + ring_entries * ring_entry;
  static_assert(ring_stamps_at + ring_stamp * ring_entries <= stage_header, "ddl: the ring's stamps fit in the header");
  /// Over stages (real memory: not the simulator's, whose reads cross
  /// links), a two_shot whose inputs are not all shared buffers, and an
  /// all-gather whose parts are not, go through the stages in segments of at
  /// most this many bytes per part, one after another, each a call of its
  /// own: the stage stays in cache, so its copies cost cache traffic, not
  /// memory's. Open MPI ranks, plain buffers, in place, medians: two_shot
  /// 2.3x faster at 16 MiB and 2.4x at 128 MiB than through a stage of the
  /// whole buffer at 2 ranks, 1.2-1.3x at 4, 1.0-1.1x at 8; the all-gather
  /// 1.6-1.7x at 2 ranks, level at 4 and 8 (segments of 256 KiB-8 MiB
  /// tried; bench/results/mpi-vs-openmpi-mpich-gloo.md, 2026-11-26).
  static constexpr std::size_t stage_segment = std::size_t{1} << 20;
  /// Over `read_peer`: bytes of each peer's part read at a time for a
  /// reduction (into `pieces_`, a buffer that stays in cache; 64 KiB and
  /// 1 MiB ran 5-15% slower than 256 KiB at 2 ranks).
  static constexpr std::size_t read_piece = std::size_t{256} << 10;
  /// What a plan's or strategy's name gains when it reads its peers
  /// (`describe`: `two_shot (read_peer)`).
  static constexpr const char* reading_suffix = " (read_peer)";
  /// What a plan's or strategy's name gains when it writes its stage with
  /// streaming stores (`two_shot (streamed)`).
  static constexpr const char* streaming_suffix = " (streamed)";
  /// Over stages, a streamed call (`streams_`) out of place streams what it
  /// gathers into its result too from this many bytes of result
  /// (`gathered_copy`).
  static constexpr std::size_t stream_result_from = std::size_t{8} << 20;
  /// Whether this call copies the peers' plain buffers where they lie
  /// (`read_peer`) instead of through the stages: asked for
  /// (`reading_peers`) and possible (`memory_readable`, the same answer on
  /// every rank).
  template <class Transport>
  bool reads_memory(const Transport& t) const {
    if constexpr (has_read_peer_v<Transport>) return reads_ && t.memory_readable();
    (void)t;
    return false;
  }
  template <class Transport>
  static constexpr bool stages_in_segments_v =
      !has_peer_memory_v<Transport> && !direct_reads_over_links_v<Transport>;
  /// Elements of `es` bytes in one segment.
  static constexpr std::size_t segment_elements(std::size_t es) noexcept {
    return stage_segment / es > 0 ? stage_segment / es : 1;
  }
  /// Whether `[p, p + bytes)` lies in a `shared_buffer` on every rank (its
  /// peers then read it in place, and no segments are needed): one round,
  /// the same answer on every rank.
  template <class Transport>
  static bool every_rank_shared(Transport& t, const std::byte* p, std::size_t bytes, const call_context& c,
                                const char* what) {
    std::vector<std::byte> shared(static_cast<std::size_t>(t.size()));
    shared[static_cast<std::size_t>(t.rank())] = region_of<Transport>(p, bytes) ? std::byte{1} : std::byte{0};
    exchange_with_all(t, shared.data(), 1, c, c.base_tag + tag_offset::addresses, what);
    return std::none_of(shared.begin(), shared.end(), [](std::byte b) { return b == std::byte{0}; });
  }

  template <class Transport>
  void validate(const Transport& t) {
    require_peer_access<Transport>();
    if (!peers_reachable(t))
      throw invalid_argument("one_shot and two_shot read their peers' memory, and this transport's ranks cannot "
                             "(MPI: ranks on more than one machine, shared memory refused, or DDL_MPI_SHM=0); "
                             "use ring, multi_ring or auto");
  }
  static std::size_t reduce_scatter_workspace(std::size_t, dtype, int) { return 0; }

  /// `out` = this rank's block of the reduction, read from every rank's `in`.
  template <class Transport>
  void reduce_scatter(Transport& t, const std::byte* in, std::byte*, std::byte* out, std::size_t count,
                      const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, n, r);
    if (n == 1) {
      local_copy(c, out, in, count * es);
      local_finalize(c, out, count, 1);
      return;
    }
    if constexpr (has_wait_until_v<Transport>) {
      if (count * es <= flagged_limit) {  // one round through the stages' counters
        flagged_round(t, in, count * es, count * es, c);
        for (auto& from : sources_) from += mine.offset * es;
        if (mine.size > 0) c.mem->reduce_many(c.mem->ctx, out, sources_.data(), n, mine.size, c.red);
        local_finalize(c, out, mine.size, n);
        return;
      }
    }
    reduce_scatter_parts(t, blocks{count, n}, in, out, count, c);
    local_finalize(c, out, mine.size, n);
  }

  /// `block_of(count, n, j)` as a partition (`reduce_scatter_parts`).
  struct blocks {
    std::size_t count;
    int n;
    block operator()(int j) const noexcept { return block_of(count, n, j); }
  };

  /// The direct reduce-scatter over any partition of `count` elements into
  /// one contiguous part per rank (`part(j)`, element offsets; a multi-ring
  /// level's `ring_slices`): `own` = part `part(rank)` of every rank's `in`
  /// reduced in rank order, not finalised. Synchronised by messages (no
  /// counters in stages): runs on group views too.
  template <class Transport, class Part>
  void reduce_scatter_parts(Transport& t, const Part& part, const std::byte* in, std::byte* own, std::size_t count,
                            const call_context& c) {
    const block mine = part(t.rank());
    if (t.size() == 1) {  // a group of one (a first dimension of extent 1): nothing to read, no stage needed
      local_copy(c, own, in + mine.offset * size_of(c.red.type), mine.size * size_of(c.red.type));
      return;
    }
    shared_region in_at;
    if constexpr (!has_peer_memory_v<Transport>) {  // peers read `in` where it lies (a shared buffer) or staged
      in_at = region_of<Transport>(in, count * size_of(c.red.type));
      if (in_at || reads_memory(t)) skip_stage(count * size_of(c.red.type), c);
      else stage_input(t, in, count, mine, c);
    }
    share_addresses(t, in, own, "direct reduce-scatter", c, in_at);
    reduce_block_reading(t, mine, own, c);
    end_of_phase(t, c, tag_offset::call_done, "direct reduce-scatter: peers reading");
  }

  /// `out` = every rank's block, copied from where each rank holds it.
  template <class Transport>
  void all_gather(Transport& t, const std::byte* own, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const block mine = block_of(count, n, r);
    if (n == 1) {
      local_copy(c, out + mine.offset * es, own, mine.size * es);
      return;
    }
    if constexpr (has_wait_until_v<Transport>) {
      if (count * es <= flagged_limit) {  // one round through the stages' counters: each slot holds its block
        flagged_round(t, own, mine.size * es, count * es, c);
        for (int k = 0; k < n; ++k) {
          const int p = (r + k) % n;
          const block b = block_of(count, n, p);
          local_copy(c, out + b.offset * es, k == 0 ? own : sources_[static_cast<std::size_t>(p)], b.size * es);
        }
        return;
      }
    }
    if constexpr (stages_in_segments_v<Transport>) {
      const std::size_t per = segment_elements(es);
      if (block_of(count, n, 0).size > per && !reads_memory(t) &&  // block 0 is the largest
          !every_rank_shared(t, own, block_of(count, n, r).size * es, c, "direct all-gather: shared buffers")) {
        stream_result(own, mine.size * es, out, count * es);  // (all_gather_parts sets it itself)
        all_gather_segments(t, own, out, count, per, c);
        return;
      }
    }
    all_gather_parts(t, blocks{count, n}, own, out, count, c);
  }

  /// The direct all-gather through the stages, `per` elements of every
  /// rank's block at a time (`stage_segment`): each segment its own stage
  /// copy, address exchange and end of phase.
  template <class Transport>
  void all_gather_segments(Transport& t, const std::byte* own, std::byte* out, std::size_t count, std::size_t per,
                           const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    const auto length = [&](const block& b, std::size_t from) { return b.size > from ? std::min(per, b.size - from) : 0; };
    for (std::size_t from = 0; from < block_of(count, n, 0).size; from += per) {
      open_stage(t, per * es, c);
      streamable_copy(c, shared_stage_, own + from * es, length(block_of(count, n, r), from) * es);
      share_addresses(t, own, out, "direct all-gather: addresses", c);  // the peers' `in`: their stages
      for (int k = 0; k < n; ++k) {
        const int p = (r + k) % n;
        const block b = block_of(count, n, p);
        const std::byte* src = k == 0 ? own + from * es : peers_[static_cast<std::size_t>(p)].in;
        gathered_copy<Transport>(c, out + (b.offset + from) * es, src, length(b, from) * es);
      }
      end_of_phase(t, c, tag_offset::call_done, "direct all-gather: peers reading");
    }
  }

  /// The direct all-gather over any partition (`reduce_scatter_parts`):
  /// `out` = every rank's part, copied from where it holds it (`own`).
  template <class Transport, class Part>
  void all_gather_parts(Transport& t, const Part& part, const std::byte* own, std::byte* out, std::size_t count,
                        const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    stream_result(own, part(r).size * es, out, count * es);
    if (n == 1) {  // a group of one: its own part only, no stage needed
      const block mine = part(r);
      local_copy(c, out + mine.offset * es, own, mine.size * es);
      return;
    }
    shared_region own_at;
    if constexpr (!has_peer_memory_v<Transport>) {  // peers read this rank's part where it lies: a shared buffer, or its stage
      const block mine = part(r);
      own_at = region_of<Transport>(own, mine.size * es);
      if (own_at || reads_memory(t)) {
        skip_stage(count * es, c);
      } else {
        open_stage(t, count * es, c);
        streamable_copy(c, shared_stage_ + mine.offset * es, own, mine.size * es);
      }
    }
    share_addresses(t, own, out, "direct all-gather", c, own_at);
    for (int k = 0; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = part(p);
      const std::byte* from = peers_[static_cast<std::size_t>(p)].in;  // its part where it lies, or its stage
      if (k > 0 && !reads_in_place<Transport>(p) && !remote(t, static_cast<std::size_t>(p))) from += b.offset * es;
      copy_from(t, p, out + b.offset * es, from, b.size * es, c);
    }
    end_of_phase(t, c, tag_offset::call_done, "direct all-gather: peers reading");
  }

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
  /// at once, half each. Open MPI and MPICH ranks on 2 cores, 32 KiB-16 MiB:
  /// `MPI_Bcast` / ddl 1.2-3.35 where the stages or the tree gave 0.72-1.24;
  /// against the reader reading the whole: 1.25x at 32 KiB, 2.9x at 1 MiB.
  /// Threads: 64 KiB-16 MiB 1.3-5.3x faster than the tree `auto` measured
  /// before (bench/results/mpi-vs-openmpi-mpich-gloo.md, 2026-12-04).
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

 protected:
  template <class Transport>
  static constexpr void require_peer_access() {
    static_assert(reaches_peers_v<Transport>,
                  "ddl: one_shot and two_shot read their peers' buffers in place and need a transport whose ranks "
                  "share memory ('static constexpr bool peer_memory = true', e.g. ddl::local_transport) or "
                  "stages ('peer_stage', e.g. ddl::mpi_transport); over other transports use ring, multi_ring "
                  "or auto");
  }

  struct addresses {
    const std::byte* in;
    const std::byte* out;
    const std::byte* staged;   // one_shot: this call's input, copied into the rank's stage; null: none
    std::uint64_t generation;  // one_shot: which staged call this is (the same on every rank in step)
    std::atomic<std::uint64_t>* done;  // one_shot: bumped by each peer once it has read `staged`
    std::uint64_t bytes;               // over `peer_stage`: the call's bytes
    std::uint64_t stage_read;          // over `peer_stage`: whether the rank's stage holds what its peers read
    shared_region in_at, out_at;       // over `peer_stage`: `in`, `out` in a `shared_buffer` (peers read them there)
    const std::atomic<std::uint64_t>* read;  // one_shot over `peer_memory`: how far the rank has read (`read_progress`)
  };

  /// Trades (in, out, staged, generation, done, read) with every peer; afterwards
  /// `peers_[p]` holds rank p's. Over `peer_stage` transports, the peers'
  /// `in` and `out` then point, as mapped here, into their `shared_buffer`s
  /// where `in_at` / `out_at` said they lie (read in place, as over
  /// `peer_memory`, `reads_in_place`), else into their stages (this rank's
  /// own stay its buffers), once every rank says the same size.
  template <class Transport>
  void share_addresses(Transport& t, const std::byte* in, std::byte* out, const char* what, const call_context& c,
                       const shared_region& in_at = {}, const shared_region& out_at = {},
                       const std::byte* staged = nullptr, std::uint64_t generation = 0,
                       std::atomic<std::uint64_t>* done = nullptr, const std::atomic<std::uint64_t>* read = nullptr) {
    require_peer_access<Transport>();
    if (!c.mem->reduce_many)
      throw invalid_argument(std::string(c.strategy) + ": buffers in " + c.mem->name +
                             " memory offer no n-way reduction (memory_ops::reduce_many); use ring or auto");
    const auto n = static_cast<std::size_t>(t.size());
    if (peers_.size() != n) {
      peers_.assign(n, addresses{nullptr, nullptr, nullptr, 0, nullptr, 0, 0, {}, {}, nullptr});
      sources_.assign(n, nullptr);
    }
    peers_[static_cast<std::size_t>(t.rank())] =
        addresses{in, out, staged, generation, done, stage_bytes_, staged_ ? 1u : 0u, in_at, out_at, read};
    exchange_with_all(t, reinterpret_cast<std::byte*>(peers_.data()), sizeof(addresses), c,
                      c.base_tag + tag_offset::addresses, what);
    if constexpr (!has_peer_memory_v<Transport>) {
      for (std::size_t p = 0; p < n; ++p) {
        if (p == static_cast<std::size_t>(t.rank())) continue;
        if (peers_[p].bytes != stage_bytes_)
          throw mismatch_error(std::string(what) + ": rank " + std::to_string(p) + " called with " +
                               std::to_string(peers_[p].bytes) + " bytes and rank " + std::to_string(t.rank()) +
                               " with " + std::to_string(stage_bytes_) + " (count or dtype)");
        addresses& a = peers_[p];
        const std::byte* at =
            a.stage_read ? t.peer_stage(static_cast<int>(p), stage_prefix + stage_bytes_) + stage_prefix : nullptr;
        // Neither mapped nor staged (`remote`): the peer's own addresses, for `read_peer`.
        a.in = a.in_at ? peer_buffer_of(t, static_cast<int>(p), a.in_at) : remote(t, p) ? a.in : at;
        a.out = a.out_at ? peer_buffer_of(t, static_cast<int>(p), a.out_at) : remote(t, p, true) ? a.out : at;
      }
    }
  }

  /// Over `peer_stage`: where `[p, p + bytes)` lies in a `shared_buffer` its
  /// peers can map (`peer_buffer`); none on transports that cannot.
  template <class Transport>
  static shared_region region_of(const std::byte* p, std::size_t bytes) noexcept {
    if constexpr (has_peer_buffer_v<Transport>) return shared_registry::find(p, bytes);
    (void)p;
    (void)bytes;
    return {};
  }
  template <class Transport>
  static const std::byte* peer_buffer_of(Transport& t, int p, const shared_region& r) {
    if constexpr (has_peer_buffer_v<Transport>) return t.peer_buffer(p, r);
    (void)t;
    (void)p;
    (void)r;
    throw invalid_argument("a peer named a shared buffer over a transport that cannot map one");
  }
  /// Whether rank `p`'s `in` (after `share_addresses`) is its buffer itself
  /// (`peer_memory`, or a `shared_buffer`), not its stage.
  template <class Transport>
  bool reads_in_place(int p) const noexcept {
    return has_peer_memory_v<Transport> || static_cast<bool>(peers_[static_cast<std::size_t>(p)].in_at);
  }

  static void require_host(const call_context& c) {
    if (std::strcmp(c.mem->name, "host") != 0)
      throw invalid_argument(std::string(c.strategy) + ": stages hold host memory only (buffers in " + c.mem->name +
                             " memory); use ring or auto");
  }

  /// Over `peer_stage`: this rank's stage for a call of `bytes` (`shared_stage_`,
  /// `stage_bytes_`); its buffers must be host memory.
  template <class Transport>
  void open_stage(Transport& t, std::size_t bytes, const call_context& c) {
    require_host(c);
    stage_bytes_ = bytes;
    staged_ = true;
    shared_stage_ = t.stage(stage_prefix + bytes) + stage_prefix;
  }
  /// `bytes` of `src` into memory this rank's peers read next (over
  /// `peer_stage`: its stage; over `peer_memory`: a block it gathers into
  /// its own buffer, which they read where it lies in the next call) or that
  /// it gathers from them into its result: with streaming stores when asked
  /// (`streams_`) and the memory has them (`memory_ops::stream_copy`), else
  /// `local_copy`.
  void streamable_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) const {
    if (streams_) streaming_copy(c, dst, src, bytes);
    else local_copy(c, dst, src, bytes);
  }
  /// `bytes` of `src` into `dst` (ranges apart) with streaming stores where
  /// the memory has them (`memory_ops::stream_copy`), else `local_copy`.
  static void streaming_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) {
    if (!c.mem->stream_copy) return local_copy(c, dst, src, bytes);
    if (bytes && dst != src) c.mem->stream_copy(c.mem->ctx, dst, src, bytes);
  }
  /// Over `peer_stage`: a call of `bytes` whose peers read nothing from this
  /// rank's stage (its buffers lie in a `shared_buffer`).
  void skip_stage(std::size_t bytes, const call_context& c) {
    require_host(c);
    stage_bytes_ = bytes;
    staged_ = false;
  }

  /// Over `peer_stage`: this call's `count` elements of `in` into this
  /// rank's stage at their own offsets, all but block `skip` (which only
  /// this rank reads, from `in`).
  template <class Transport>
  void stage_input(Transport& t, const std::byte* in, std::size_t count, const block& skip, const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    open_stage(t, count * es, c);
    const std::size_t from = skip.offset * es, to = (skip.offset + skip.size) * es;
    if (from > 0) streamable_copy(c, shared_stage_, in, from);
    if (to < stage_bytes_) streamable_copy(c, shared_stage_ + to, in + to, stage_bytes_ - to);
  }

  /// Over stages a transport can wait on (`wait_until`), for calls of at
  /// most `flagged_limit` bytes: one synchronisation without a message
  /// (`flagged_meet`), `src` copied into this rank's slot with streaming
  /// stores when asked (`streamable_copy`: the peers read the slot next).
  /// Afterwards `sources_[p]` is rank p's slot (this rank's own too).
  template <class Transport>
  void flagged_round(Transport& t, const std::byte* src, std::size_t bytes, std::uint64_t call_bytes,
                     const call_context& c) {
    const auto n = static_cast<std::size_t>(t.size());
    if (sources_.size() != n) sources_.assign(n, nullptr);
    flagged_meet_filled(
        t, [&](std::byte* own) { if (bytes > 0) streamable_copy(c, own, src, bytes); }, call_bytes, c,
        [this](int p, const std::byte* slot) { sources_[static_cast<std::size_t>(p)] = slot; });
  }

  /// One synchronisation through the stages' counters, no message. Rank r's
  /// k-th such meeting copies `bytes` (at most `flagged_limit`) of `src`
  /// into slot k % 2 of its stage, writes the call's stamp (its bytes
  /// `call_bytes`, its tag) beside it and raises its counter to k; it then
  /// waits for each peer's counter to reach k and checks the peer's stamp
  /// against its own (`mismatch_error` naming the field and both ranks).
  /// `slot(p, at)` is told where rank p's slot lies (this rank's first). A
  /// rank writes slot k % 2 again in meeting k + 2 only once every peer
  /// raised its counter to k + 1, so after each had finished reading
  /// meeting k (`flagged_meet_filled` waits for that where meeting k + 1
  /// did not).
  template <class Transport, class Slot>
  static void flagged_meet(Transport& t, const std::byte* src, std::size_t bytes, std::uint64_t call_bytes,
                           const call_context& c, Slot&& slot) {
    flagged_meet_filled(
        t, [&](std::byte* own) { if (bytes > 0) local_copy(c, own, src, bytes); }, call_bytes, c,
        std::forward<Slot>(slot));
  }
  /// As `flagged_meet`, with `fill(own)` writing this rank's slot (at most
  /// `flagged_limit` bytes). `watch` says whose counters the meeting waits
  /// for (and whose slots `slot` is told of): every peer (-1), none (this
  /// rank: it leaves once its slot is written), or that rank alone -- the
  /// one-way meetings of a gather (the root watches everyone, the others
  /// no one) and a scatter (the others watch the root). Whatever the last
  /// meeting watched, a rank writes slot k % 2 only once every peer has
  /// raised its counter to k - 1 (left meeting k - 2, whose slot it may have
  /// read): after a meeting that watched everyone that holds already.
  template <class Transport, class Fill, class Slot>
  static void flagged_meet_filled(Transport& t, Fill&& fill, std::uint64_t call_bytes, const call_context& c,
                                  Slot&& slot, int watch = -1) {
    const int n = t.size(), r = t.rank();
    require_host(c);
    std::byte* mine = t.stage(stage_prefix);
    auto* counter = reinterpret_cast<std::uint64_t*>(mine);
    const std::uint64_t k = __atomic_load_n(counter, __ATOMIC_RELAXED) + 1;
    const std::size_t s = k % 2;
    const deadline until = phase_deadline(c);
    auto counter_of = [&](int p) { return reinterpret_cast<const std::uint64_t*>(t.peer_stage(p, stage_header)); };
    for (int d = 1; d < n && k > 1; ++d) {
      const int p = (r + d) % n;
      const auto* theirs = counter_of(p);
      if (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) + 1 < k)
        wait_on_peer(t, p, [theirs, k] { return __atomic_load_n(theirs, __ATOMIC_ACQUIRE) + 1 >= k; }, until, c,
                     phase_name{"peers' stages (reading the last meeting)", 0, 1});
    }
    const std::uint64_t stamp[2] = {call_bytes, c.base_tag};
    std::memcpy(mine + 64 * (s + 1), stamp, sizeof stamp);
    std::byte* own = mine + stage_header + s * flagged_limit;
    fill(own);
    __atomic_store_n(counter, k, __ATOMIC_RELEASE);
    raised(t);
    slot(r, own);
    for (int d = 1; d < n; ++d) {
      const int p = (r + d) % n;
      if (watch >= 0 && p != watch) continue;
      const auto* theirs = counter_of(p);
      wait_on_peer(t, p, [theirs, k] { return __atomic_load_n(theirs, __ATOMIC_ACQUIRE) >= k; }, until, c,
                   phase_name{"peers' stages", 0, 1});
      const std::byte* at = t.peer_stage(p, stage_prefix);  // grown that far before it raised its counter
      std::uint64_t their[2];
      std::memcpy(their, at + 64 * (s + 1), sizeof their);
      check_stamp(r, stamp, p, their, size_of(c.red.type), c);
      slot(p, at + stage_header + s * flagged_limit);
    }
  }

  /// Tells `t` this rank raised a counter its peers may wait on
  /// (`stage_raised`, where the transport has it).
  template <class Transport>
  static void raised(Transport& t) {
    if constexpr (has_stage_raised_v<Transport>) t.stage_raised();
    else (void)t;
  }

  /// `t.wait_until(p, ready, ...)` in phase `ph` (`in_phase`).
  template <class Transport, class Ready>
  static void wait_on_peer(Transport& t, int p, Ready&& ready, deadline until, const call_context& c,
                           const phase_name& ph) {
    in_phase(c, ph, [&] { t.wait_until(p, std::forward<Ready>(ready), until, c.base_tag); });
  }

  // A flagged call's stamps, this rank's (`me`) against peer `p`'s: the
  // same tag (collective, dtype, op, a hash of the count, root and strategy,
  // the call's number) and the same bytes, else `mismatch_error` naming the
  // field (as the messages' stamps do) and both ranks.
  static void check_stamp(int me, const std::uint64_t (&mine)[2], int p, const std::uint64_t (&theirs)[2],
                          std::size_t esize, const call_context& c) {
    const bool same_call = detail::call_of(mine[1]) == detail::call_of(theirs[1]);
    const unsigned differ = detail::stamp_of(mine[1]) ^ detail::stamp_of(theirs[1]);
    const bool fields_differ = (differ & detail::stamp_fields_mask) != 0;
    std::string why;
    if (same_call && fields_differ)  // the collective, dtype or op
      why = detail::stamp_mismatch(me, mine[1], p, theirs[1]);
    else if (theirs[0] != mine[0])
      why = std::string(detail::mismatch_words) + detail::describe_tag(mine[1]) +
            ": ranks disagree on the input count: rank " + std::to_string(me) + " passed " +
            std::to_string(mine[0] / esize) + ", rank " + std::to_string(p) + " passed " +
            std::to_string(theirs[0] / esize);
    else if (detail::stamps_disagree(mine[1], theirs[1]))
      why = detail::stamp_mismatch(me, mine[1], p, theirs[1]);
    else if (theirs[1] != mine[1])
      why = std::string(detail::mismatch_words) + "rank " + std::to_string(me) + " is in " +
            detail::describe_tag(mine[1]) + ", rank " + std::to_string(p) + " in " + detail::describe_tag(theirs[1]) +
            " (communicators sharing a transport called in different orders?)";
    if (!why.empty()) throw mismatch_error(std::string(c.strategy) + ": " + why);
  }

  /// Block `b` of every rank's input (its staged copy with `staged`), reduced
  /// in rank order into `dst`.
  void reduce_block(const block& b, std::byte* dst, const call_context& c, bool staged = false) {
    const std::size_t es = size_of(c.red.type);
    for (std::size_t p = 0; p < peers_.size(); ++p)
      sources_[p] = (staged ? peers_[p].staged : peers_[p].in) + b.offset * es;
    c.mem->reduce_many(c.mem->ctx, dst, sources_.data(), static_cast<int>(sources_.size()), b.size, c.red);
  }
  /// Over `read_peer` (after `share_addresses`): whether rank `p`'s `in`
  /// (its `out` with `out`) in `peers_` is an address in its own process,
  /// neither mapped here (a shared buffer) nor staged, so read with
  /// `read_peer`. Never this rank's own.
  template <class Transport>
  bool remote(const Transport& t, std::size_t p, bool out = false) const {
    if constexpr (has_read_peer_v<Transport> && !has_peer_memory_v<Transport>) {
      const addresses& a = peers_[p];
      return p != static_cast<std::size_t>(t.rank()) && !a.stage_read && !(out ? a.out_at : a.in_at);
    }
    (void)t;
    (void)p;
    (void)out;
    return false;
  }
  /// `reduce_block` of the peers' `in` (after `share_addresses`), reading
  /// the peers whose `in` lies in their own process (`remote`) with
  /// `read_peer`, `read_piece` bytes of each at a time.
  template <class Transport>
  void reduce_block_reading(Transport& t, const block& b, std::byte* dst, const call_context& c) {
    const std::size_t n = peers_.size();
    std::size_t reads = 0;
    for (std::size_t p = 0; p < n; ++p) reads += remote(t, p) ? 1 : 0;
    if (reads == 0) {
      reduce_block(b, dst, c);
      return;
    }
    if constexpr (has_read_peer_v<Transport>) {
      const std::size_t es = size_of(c.red.type);
      const std::size_t per = std::max<std::size_t>(read_piece / es, 1);
      if (pieces_.size() < reads * per * es) pieces_.resize(reads * per * es);  // once: fresh pages are slow to write
      for (std::size_t off = 0; off < b.size; off += per) {
        const std::size_t len = std::min(per, b.size - off);
        std::byte* piece = pieces_.data();
        for (std::size_t p = 0; p < n; ++p) {
          const std::byte* at = peers_[p].in + (b.offset + off) * es;
          if (!remote(t, p)) {
            sources_[p] = at;
            continue;
          }
          t.read_peer(static_cast<int>(p), at, piece, len * es);
          sources_[p] = piece;
          piece += per * es;
        }
        c.mem->reduce_many(c.mem->ctx, dst + off * es, sources_.data(), static_cast<int>(n), len, c.red);
      }
    }
  }
  /// `bytes` of rank `p` at `from` (as `share_addresses` left it) into
  /// `dst`: with `read_peer` where `from` lies in the peer's process.
  template <class Transport>
  void copy_from(Transport& t, int p, std::byte* dst, const std::byte* from, std::size_t bytes, const call_context& c,
                 bool out = false) {
    if constexpr (has_read_peer_v<Transport>) {
      if (remote(t, static_cast<std::size_t>(p), out)) {
        t.read_peer(p, from, dst, bytes);
        return;
      }
    }
    (void)t;
    (void)p;
    (void)out;
    gathered_copy<Transport>(c, dst, from, bytes);
  }
  /// `bytes` of a peer's part (or this rank's own) at `src` into this
  /// call's result at `dst`: streamed when asked (`streams_`) over
  /// `peer_memory`, where the result's lines are what the peers read next
  /// call, and elsewhere out of place from `stream_result_from` bytes of
  /// result (`stream_result`): too large to stay in cache and not just read
  /// by this rank, so a write that need not first read the line pays (the
  /// streamed form out of place, 2 MPI ranks: all-gather 8-64 MiB 1.0-1.2x
  /// faster, all-reduce 16-256 MiB 1.1-1.15x, 4 ranks 64 MiB 1.1-1.4x; in
  /// place 8-16 MiB 0.9x, at 1 MiB 0.8-0.9x:
  /// bench/results/mpi-vs-openmpi-mpich-gloo.md, 2026-12-04 (night, later));
  /// else `local_copy`.
  template <class Transport>
  void gathered_copy(const call_context& c, std::byte* dst, const std::byte* src, std::size_t bytes) const {
    if (has_peer_memory_v<Transport> || streams_result_) streamable_copy(c, dst, src, bytes);
    else local_copy(c, dst, src, bytes);
  }
  /// Sets `streams_result_` for a call whose result `out` of `bytes` is
  /// gathered from its input (or own part) of `in_bytes` at `in`.
  void stream_result(const std::byte* in, std::size_t in_bytes, const std::byte* out, std::size_t bytes) noexcept {
    streams_result_ = bytes >= stream_result_from && !detail::overlaps(in, in_bytes, out, bytes);
  }

  /// Returns once every rank has reached this point.
  template <class Transport>
  static void end_of_phase(Transport& t, const call_context& c, tag offset, const char* what) {
    exchange_with_all(t, nullptr, 0, c, c.base_tag + offset, what);
  }

  bool reads_ = false;    // see `reads_memory`
  bool streams_ = false;  // see `streamable_copy`
  bool streams_result_ = false;  // see `gathered_copy`
  std::vector<addresses> peers_;
  std::vector<const std::byte*> sources_;
  std::vector<std::byte> pieces_;  // over `read_peer`: `read_piece` bytes per peer read (`reduce_block_reading`)
  std::byte* shared_stage_ = nullptr;  // over `peer_stage`: this call's stage (the transport's memory)
  std::size_t stage_bytes_ = 0;        // over `peer_stage`: the call's bytes; 0 otherwise
  bool staged_ = false;                // over `peer_stage`: whether this call's peers read this rank's stage
};

/// one_shot's stage (host memory, ranks of one process): two slots, used by
/// a rank's staged calls in turn, each behind a counter its peers bump when
/// they have read it. Allocated once and grown when a larger call comes. The
/// stage outlives a rank's last call until every peer has read that call's
/// slot (the destructor waits for the count, microseconds in a healthy
/// group: a rank's peers may still be reducing when it returns; at most 5 s,
/// 1 s for a stage set aside after an error, then it is left allocated
/// rather than freed under a reader). A stage that may still be read after
/// an error is never written again: it is set aside and released the same
/// way. A copy of the strategy starts without a stage.
class stage_memory {
 public:
  using counter = std::atomic<std::uint64_t>;
  stage_memory() = default;
  stage_memory(const stage_memory&) noexcept {}
  stage_memory& operator=(const stage_memory& o) noexcept {
    if (this != &o) release_all();
    return *this;
  }
  ~stage_memory() { release_all(); }

  /// Whether slots of `bytes` are there.
  bool fits(std::size_t bytes) const noexcept { return cur_.base && cur_.slot >= bytes; }
  std::byte* slot(std::size_t i) const noexcept { return cur_.base + 2 * header + i * cur_.slot; }
  counter* done(std::size_t i) const noexcept { return reinterpret_cast<counter*>(cur_.base + i * header); }

  /// Slots of at least `bytes`: as they are if they hold it, else new ones,
  /// twice the old size up to `cap` (so a sweep of sizes allocates a few
  /// times, not once per size). The old stage is kept until `reads_over`
  /// (its last slot may be read until every peer has entered the next call).
  void reserve(std::size_t bytes, std::size_t cap) {
    if (fits(bytes)) return;
    const std::size_t grown = std::min(cap, std::max<std::size_t>(2048, 2 * cur_.slot));
    replace(std::max((bytes + 63) / 64 * 64, grown));
  }

 private:
  void replace(std::size_t bytes) {
    piece fresh;
    fresh.base = static_cast<std::byte*>(::operator new(2 * header + 2 * bytes, std::align_val_t{header}));
    fresh.slot = bytes;
    for (std::size_t i = 0; i < 2; ++i) new (fresh.base + i * header) counter(0);
    if (cur_.base) retired_.push_back(cur_);
    cur_ = fresh;
  }

 public:
  /// The peers have all entered a later call: every read of an earlier one
  /// is over (and the stage `replace` set aside may go).
  void reads_over() noexcept {
    cur_.expect = 0;
    for (piece& x : retired_)
      if (!x.failed) x.expect = 0;
    release_retired(false);
  }
  /// A staged call: `peers` peers read slot `i` and then count once each.
  void expect_reads(std::size_t i, std::uint64_t peers) noexcept {
    cur_.last = i;
    cur_.expect = peers;
  }
  /// A call failed: a peer may still read the stage, so it is set aside.
  void retire() noexcept {
    if (!cur_.base) return;
    cur_.failed = true;
    try {
      retired_.push_back(cur_);
    } catch (...) {  // no room to remember it: leaked rather than reused
    }
    cur_ = piece{};
  }

 private:
  static constexpr std::size_t header = 64;  // a counter per slot, a cache line each
  struct piece {
    std::byte* base = nullptr;
    std::size_t slot = 0;
    std::size_t last = 0;      // the slot the last staged call used
    std::uint64_t expect = 0;  // reads of it still to count (0: none pending)
    bool failed = false;       // set aside after an error: its reads may never come
  };
  // Frees `x` once its pending reads are counted; waits at most `patience`
  // seconds, then leaves it allocated (a peer that never read it may still).
  static bool release(piece& x, double patience) noexcept {
    if (!x.base) return true;
    if (x.expect > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(patience);
      auto* c = reinterpret_cast<counter*>(x.base + x.last * header);
      while (c->load(std::memory_order_acquire) < x.expect) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::yield();
      }
    }
    ::operator delete(x.base, std::align_val_t{header});
    x.base = nullptr;
    return true;
  }
  void release_retired(bool all) noexcept {
    std::size_t w = 0;
    for (std::size_t i = 0; i < retired_.size(); ++i) {
      piece& x = retired_[i];
      const bool freed = (all || (!x.failed && x.expect == 0)) && release(x, x.failed ? 1.0 : 5.0);
      if (!freed) retired_[w++] = x;
    }
    retired_.resize(w);
  }
  void release_all() noexcept {
    release(cur_, 5.0);
    cur_ = piece{};
    release_retired(true);
    retired_.clear();  // what could not be freed in time is left allocated
  }
  piece cur_;
  std::vector<piece> retired_;
};

}  // namespace detail

/// One-shot all-reduce: each rank reduces every rank's whole input itself.
/// For small messages on ranks that share memory. Up to `stage_limit` bytes
/// in place (`stage_limit_out_of_place` out of place) a call is one
/// synchronisation: each rank copies its input into its stage
/// (two slots, used in turn), the ranks trade addresses, and each reduces
/// the stages into its own output. A rank writes a slot again only two calls
/// later, when every peer has entered the call in between and so finished
/// reading it. Larger calls (and the first, and any whose ranks' stages are
/// not in step) read the inputs in place and synchronise once more before
/// returning; they need `count` elements of workspace in place (the result
/// is built there and copied back once no peer reads the input any more:
/// over threads segment by segment, `all_reduce_landed`).
/// Example:
/// \code
///   ddl::communicator<ddl::one_shot, ddl::local_transport> comm(t);
///   comm.all_reduce(ddl::host_view(g), ddl::op::sum);
/// \endcode
struct one_shot : detail::direct_base {
  static constexpr const char* name = "one_shot";
  /// The largest message (bytes per rank) that goes through the stage. In
  /// place the stage stands in for the workspace the result would be built
  /// in (the same copy, one synchronisation fewer); out of place it adds a
  /// copy of freshly written memory that every peer then reads, which costs
  /// more than the synchronisation it saves above ~16 KiB (4 threads on 2
  /// cores, bench/results/shared-memory.md: 2x slower at 256 KiB out of
  /// place, level in place).
  static constexpr std::size_t stage_limit = std::size_t{256} << 10;
  static constexpr std::size_t stage_limit_out_of_place = std::size_t{16} << 10;
  /// Whether a call of `bytes` per rank goes through the stage.
  static constexpr bool through_stage(std::size_t bytes, bool in_place) {
    return bytes > 0 && bytes <= (in_place ? stage_limit : stage_limit_out_of_place);
  }
  /// In place, over `peer_memory` with counters a rank can wait on
  /// (threads), a call above the stage: the buffer is read in segments of
  /// `land_segment` bytes, each reduced into one of `land_slots` slots at the
  /// start of the workspace (they stay in cache) and, once every peer has
  /// read that segment of every buffer (its `read_progress` counter), copied
  /// to its place in the buffer. So the result is not built whole in the
  /// workspace and copied back after a round (2 S more memory traffic).
  static constexpr std::size_t land_segment = std::size_t{64} << 10;
  static constexpr std::size_t land_slots = 4;
  static constexpr std::size_t land_elements(std::size_t es) noexcept {
    return land_segment / es > 0 ? land_segment / es : 1;
  }
  std::string describe() const { return name; }
  static std::size_t all_reduce_workspace(std::size_t count, dtype t, int) { return count * size_of(t); }

  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size();
    const std::size_t bytes = count * size_of(c.red.type);
    if (n == 1) {
      local_copy(c, out, in, bytes);
      return;
    }
    if constexpr (has_wait_until_v<Transport>) {
      if (bytes <= flagged_limit) {
        all_reduce_flagged(t, in, out, count, c);
        return;
      }
    }
    if constexpr (has_flagged_all_reduce_v<Transport>) {  // the transport's own counters (CUDA: device memory)
      if (bytes <= Transport::flagged_bytes && t.flagged_ready()) {
        t.flagged_all_reduce(in, out, count, c.red, c.base_tag,
                             std::chrono::duration_cast<std::chrono::nanoseconds>(c.opts->timeout));
        return;
      }
    }
    if constexpr (!has_peer_memory_v<Transport>) {
      // Through the transport's stages: the whole input copied in, read by
      // every peer from there, so the result may go straight to `out`. Out
      // of place an input in a shared buffer is read where it lies (in
      // place it would be overwritten while peers read it).
      const detail::shared_region in_at = in != out ? region_of<Transport>(in, bytes) : detail::shared_region{};
      if (in_at) skip_stage(bytes, c);
      else stage_input(t, in, count, block{0, 0}, c);
      share_addresses(t, in, out, "one-shot: addresses", c, in_at);
      reduce_block(block{0, count}, out, c);
      end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
      local_finalize(c, out, count, n);
    } else {
      try {
        // Stage this call's input: slot `generation_ % 2`, its counter reset
        // (no peer reads it now: each finished with it before entering the
        // call this rank has seen them all in since).
        const std::byte* staged = nullptr;
        detail::stage_memory::counter* done = nullptr;
        const std::size_t slot = generation_ % 2;
        if (through_stage(bytes, in == out) && std::strcmp(c.mem->name, "host") == 0) {
          stage_.reserve(bytes, stage_limit);
          done = stage_.done(slot);
          done->store(0, std::memory_order_relaxed);
          local_copy(c, stage_.slot(slot), in, bytes);
          staged = stage_.slot(slot);
        }
        // No peer reads this counter now: each read the last call's before
        // its end of phase, and the address exchange below orders this.
        read_.value.store(0, std::memory_order_relaxed);
        share_addresses(t, in, out, "one-shot: addresses", c, {}, {}, staged, generation_, done, &read_.value);
        stage_.reads_over();  // every peer has entered this call: no read of an earlier one is pending
        bool all_staged = true;
        std::uint64_t latest = 0;
        for (const auto& a : peers_) {
          all_staged = all_staged && a.staged && a.generation == generation_;
          latest = std::max(latest, a.generation);
        }
        if (all_staged) {
          reduce_block(block{0, count}, out, c, true);
          for (std::size_t p = 0; p < peers_.size(); ++p)
            if (p != static_cast<std::size_t>(t.rank())) peers_[p].done->fetch_add(1, std::memory_order_release);
          stage_.expect_reads(slot, static_cast<std::uint64_t>(n - 1));
          local_finalize(c, out, count, n);
          ++generation_;
          return;
        }
        const bool in_place = in == out;
        if constexpr (has_wait_until_v<Transport>) {
          if (in_place && count > land_elements(size_of(c.red.type)) && std::strcmp(c.mem->name, "host") == 0) {
            all_reduce_landed(t, out, count, c);
            generation_ = latest + 1;
            return;
          }
        }
        std::byte* dst = in_place ? c.work : out;
        reduce_block(block{0, count}, dst, c);
        // Every segment read, for peers that land theirs (`all_reduce_landed`).
        read_.value.store(read_progress::all, std::memory_order_release);
        raised(t);
        // One tag whether in place or not: ranks may differ in that.
        end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
        if (in_place) local_copy(c, out, dst, bytes);
        local_finalize(c, out, count, n);
        // Every rank saw the same table and has left it behind (the phase's
        // end): they all continue from the same generation, any slot free.
        generation_ = latest + 1;
      } catch (...) {
        stage_.retire();
        throw;
      }
    }
  }

 private:
  /// A call of at most `flagged_limit` bytes over stages a transport can
  /// wait on: one round through the stages' counters (`flagged_round`),
  /// then every rank's slot reduced, in rank order, into `out`.
  template <class Transport>
  void all_reduce_flagged(Transport& t, const std::byte* in, std::byte* out, std::size_t count,
                          const call_context& c) {
    const std::size_t bytes = count * size_of(c.red.type);
    flagged_round(t, in, bytes, bytes, c);
    if (bytes > 0) c.mem->reduce_many(c.mem->ctx, out, sources_.data(), t.size(), count, c.red);
    local_finalize(c, out, count, t.size());
  }

  /// How far a rank has read its peers' buffers in the current call: the
  /// segments done (`all`: the whole call), on a cache line of its own. Its
  /// peers wait on it before they overwrite those segments of their own
  /// buffers. A copy of the strategy starts at 0.
  struct alignas(64) read_progress {
    static constexpr std::uint64_t all = ~std::uint64_t{0};
    std::atomic<std::uint64_t> value{0};
    read_progress() = default;
    read_progress(const read_progress&) noexcept {}
    read_progress& operator=(const read_progress&) noexcept { return *this; }
  };

  template <class Transport>
  void all_reduce_landed(Transport& t, std::byte* buf, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type), per = land_elements(es);
    const std::size_t segments = (count + per - 1) / per;
    const auto segment = [&](std::size_t k) { return block{k * per, std::min(per, count - k * per)}; };
    // Slot k % land_slots; ends within the workspace (`count` elements), as k * per + its size does.
    const auto slot = [&](std::size_t k) { return c.work + (k % land_slots) * per * es; };
    // Landed with streaming stores where the memory has them: every peer
    // has just read these lines, and a cached write must first take each
    // back from their caches (2 threads, 1 MiB: 176 against 539 us a call,
    // bench/results/shared-memory.md, 2026-12-05, fourth session).
    const auto land = [&](std::size_t k) {
      const block b = segment(k);
      streaming_copy(c, buf + b.offset * es, slot(k), b.size * es);
    };
    const deadline until = phase_deadline(c);
    for (std::size_t k = 0; k < segments; ++k) {
      if (k >= land_slots) {  // slot k's last segment lands once every peer has read that far
        const std::uint64_t needed = k - land_slots + 1;
        for (int d = 1; d < n; ++d) {
          const int p = (r + d) % n;
          const auto* theirs = peers_[static_cast<std::size_t>(p)].read;
          wait_on_peer(t, p, [theirs, needed] { return theirs->load(std::memory_order_acquire) >= needed; }, until,
                       c, phase_name{"one-shot: peers reading segments", static_cast<int>(needed - 1),
                                     static_cast<int>(segments)});
        }
        land(k - land_slots);
      }
      const block b = segment(k);
      reduce_block(b, slot(k), c);
      local_finalize(c, slot(k), b.size, n);
      read_.value.store(k + 1, std::memory_order_release);
      raised(t);
    }
    end_of_phase(t, c, tag_offset::call_done, "one-shot: peers reading");
    for (std::size_t k = segments > land_slots ? segments - land_slots : 0; k < segments; ++k) land(k);
  }

  detail::stage_memory stage_;
  std::uint64_t generation_ = 0;  // staged calls in step so far
  read_progress read_;
};

/// Whether two_shot over `T` writes each reduced block into every rank's
/// result itself (`two_shot`, "pushed"): ranks of one process that reduce
/// on the host (`peer_memory` without a two_shot of the transport's own on
/// a device, `flagged_two_shot`: threads); the call's memory must be the
/// host's too.
template <class T>
inline constexpr bool two_shot_pushes_v = has_peer_memory_v<T> && !has_flagged_two_shot_v<T>;

/// Two-shot all-reduce: a direct reduce-scatter (each rank reduces its block
/// from all n inputs at once), then a direct all-gather of the reduced
/// blocks. For large messages on ranks that share memory; in place needs no
/// workspace. Over threads (`two_shot_pushes_v`, host memory) the reducer
/// of a block writes it into every rank's result, `push_piece` bytes at a
/// time as it reduces them (only the block's reducer reads or writes block
/// r of any buffer during the call, so in place too), and one
/// synchronisation ends the call where pulling the blocks took one more
/// between the phases and a second pass over the reduced block (old and
/// new in turns, medians of 3: 2 and 4 threads 1.2-10x faster at 4 KiB-64
/// MiB, 8 threads 1.0-1.8x in place and 0.75-1.4x out of place:
/// bench/results/shared-memory.md, 2026-12-05).
struct two_shot : detail::direct_base {
  static constexpr const char* name = "two_shot";
  std::string describe() const {
    return std::string(name) + (reads_ ? reading_suffix : streams_ ? streaming_suffix : "");
  }
  /// Over stages whose ranks copy from each other's memory (`read_peer`,
  /// `memory_readable`: MPI ranks of one machine that the kernel lets
  /// attach to each other), read the peers' plain buffers where they lie,
  /// whole, instead of through the stages in segments; elsewhere nothing
  /// changes. Off by default: on this project's 2-core VM it won at 2 ranks
  /// and 2-16 MiB and lost at 4 and 8 ranks and at 128 MiB; `auto` measures
  /// both (`plan::reads`). Covers the direct reduce-scatter and all-gather too.
  two_shot& reading_peers(bool on = true) noexcept {
    reads_ = on;
    return *this;
  }
  /// Over stages (`peer_stage`, host memory), write them with streaming
  /// stores (`memory_ops::stream_copy`): the copies in go to memory, and the
  /// peers read them from there, not from this core's cache. Where the
  /// ranks' cores lie far apart (a cache line's round trip 320 ns on this
  /// project's VM when the host places its two vCPUs apart, against 65-125
  /// ns close) a cached write waits to take each line back from the peer
  /// that read it, and the stages ran 3x slower than streamed (2 MPI ranks,
  /// 64 MiB: 45 against 14 ms); close, streamed ran 1.3x slower. The blocks
  /// a rank gathers from its peers into its result are streamed too, over
  /// stages from `stream_result_from` bytes of result (`gathered_copy`: a
  /// write that need not first read the line); over threads (no stages) the
  /// blocks it writes into its peers' results (`all_reduce_pushed`), at any
  /// size (when threads pulled the blocks instead: 4 threads in place, 64
  /// MiB, 1.6-2.2x faster than cached, 4 MiB at 2 threads 1.4x slower). Off by
  /// default; `auto` measures both (`plan::streams`). Covers the direct
  /// all-gather too, and the reduce-scatter over stages, and the slot a call
  /// of up to `flagged_limit` bytes writes (`flagged_round`); nothing changes
  /// when reading the peers (`reading_peers`).
  two_shot& streaming_stages(bool on = true) noexcept {
    streams_ = on;
    return *this;
  }
  static std::size_t all_reduce_workspace(std::size_t, dtype, int) { return 0; }

  template <class Transport>
  void all_reduce(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const std::size_t es = size_of(c.red.type);
    stream_result(in, count * es, out, count * es);
    if constexpr (has_flagged_two_shot_v<Transport>) {  // the transport's own counters (CUDA: device memory)
      if (t.size() > 1 && count > 0 && t.flagged_ready()) {
        t.flagged_two_shot(in, out, count, c.red, c.base_tag,
                           std::chrono::duration_cast<std::chrono::nanoseconds>(c.opts->timeout));
        return;
      }
    }
    if constexpr (stages_in_segments_v<Transport>) {
      const std::size_t per = segment_elements(es);
      if (t.size() > 1 && count > per && !reads_memory(t) &&
          !every_rank_shared(t, in, count * es, c, "two-shot: shared buffers")) {
        for (std::size_t off = 0; off < count; off += per)
          all_reduce_whole(t, in + off * es, out + off * es, std::min(per, count - off), c);
        return;
      }
    }
    all_reduce_whole(t, in, out, count, c);
  }

 private:
  template <class Transport>
  void all_reduce_whole(Transport& t, const std::byte* in, std::byte* out, std::size_t count, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type);
    if (n == 1) {
      local_copy(c, out, in, count * es);
      return;
    }
    const block mine = block_of(count, n, r);
    // Over stages, peers read `in` (phase one) and `out` (phase two) where
    // they lie when they lie in a shared buffer, else copies in the stage.
    detail::shared_region in_at, out_at;
    if constexpr (!has_peer_memory_v<Transport>) {
      in_at = region_of<Transport>(in, count * es);
      out_at = region_of<Transport>(out, count * es);
      if (reads_memory(t)) skip_stage(count * es, c);  // peers read `in` and `out` where they lie
      else if (!in_at) stage_input(t, in, count, mine, c);
      else if (!out_at) open_stage(t, count * es, c);
      else skip_stage(count * es, c);
    }
    share_addresses(t, in, out, "two-shot: addresses", c, in_at, out_at);
    if constexpr (two_shot_pushes_v<Transport>) {
      if (std::strcmp(c.mem->name, "host") == 0) {
        all_reduce_pushed(t, out, mine, c);
        return;
      }
    }
    // Only rank r reads block r of any buffer until the phase ends, so the
    // result may overwrite block r of an in-place buffer.
    reduce_block_reading(t, mine, out + mine.offset * es, c);
    local_finalize(c, out + mine.offset * es, mine.size, n);
    if (!has_peer_memory_v<Transport> && !out_at && staged_)  // where the peers gather it from
      streamable_copy(c, shared_stage_ + mine.offset * es, out + mine.offset * es, mine.size * es);
    end_of_phase(t, c, tag_offset::reduced, "two-shot: reduce phase");
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      const block b = block_of(count, n, p);
      copy_from(t, p, out + b.offset * es, peers_[static_cast<std::size_t>(p)].out + b.offset * es, b.size * es, c,
                true);
    }
    end_of_phase(t, c, tag_offset::call_done, "two-shot: peers reading");
  }

  /// Over threads (`two_shot_pushes_v`), after the address exchange: block
  /// `mine` reduced from every rank's input `push_piece` bytes at a time,
  /// each piece written into this rank's result and then into every peer's
  /// (streamed with `streaming_stages`), while still in cache. Only this
  /// rank reads or writes block `mine` of any buffer until the phase ends,
  /// and a piece is read from every input before it is written anywhere.
  template <class Transport>
  void all_reduce_pushed(Transport& t, std::byte* out, const block& mine, const call_context& c) {
    const int n = t.size(), r = t.rank();
    const std::size_t es = size_of(c.red.type), per = std::max<std::size_t>(push_piece / es, 1);
    for (std::size_t off = 0; off < mine.size; off += per) {
      const block b{mine.offset + off, std::min(per, mine.size - off)};
      std::byte* piece = out + b.offset * es;
      reduce_block_reading(t, b, piece, c);
      local_finalize(c, piece, b.size, n);
      for (int k = 1; k < n; ++k) {
        const int p = (r + k) % n;
        std::byte* theirs = const_cast<std::byte*>(peers_[static_cast<std::size_t>(p)].out);  // peer memory: writable
        streamable_copy(c, theirs + b.offset * es, piece, b.size * es);
      }
    }
    end_of_phase(t, c, tag_offset::call_done, "two-shot: peers writing");
  }
  static constexpr std::size_t push_piece = std::size_t{64} << 10;
};

}  // namespace ddl
