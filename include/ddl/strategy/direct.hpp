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
///    slots (`all_reduce_flagged`): a fraction of a message round's
///    latency. The direct reduce-scatter and
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
///    copy between processes well below memcpy's rate.
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
/// (shm/shared_buffer.hpp) is read where it lies, as over
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
/// segment, but each read is a system call that pins the peer's pages:
/// faster or slower than the stages by rank count and size, so `auto`
/// measures both (`plan::reads`).
///
/// `two_shot::streaming_stages()` writes the stages with streaming stores
/// (`memory_ops::stream_copy`), so that a write need not first take each
/// line back from the peer's cache that read it last: faster where the
/// ranks' cores lie far apart, slower where they share a cache; `auto`
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
/// Cost model (`cost::price_direct`, calibrated on threads and MPI ranks):
/// with M the memory bandwidth one rank gets and sigma one synchronisation
/// round,
///     one_shot: 2 sigma + (n+1) S / M          two_shot: 3 sigma + (3n-1) S / (n M)
/// one_shot through its stage is one round, not two, but a round that waits
/// on every peer costs about two steps that wait on one, so it keeps the
/// price of two.
///
/// The parts, one concern a file, under strategy/direct/: layout.hpp (the
/// stage's layout and sizes), peers.hpp (the address exchange and reading
/// the peers), meetings.hpp (message-free meetings), stage_collectives.hpp
/// (broadcast, all-to-all, gather, scatter, reduce through the stages),
/// device_peers.hpp (the direct collectives over processes that map each
/// other's device memory), scatter_gather.hpp (the direct reduce-scatter
/// and all-gather),
/// stage_memory.hpp, one_shot.hpp, two_shot.hpp.
#include "ddl/strategy/direct/one_shot.hpp"
#include "ddl/strategy/direct/two_shot.hpp"
