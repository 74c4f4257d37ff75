#pragma once
/// \file
/// The Transport concept: what a strategy needs from the layer that moves
/// bytes. A transport connects `size()` ranks and moves bytes between two of
/// them, non-blocking; `wait` completes a request or throws.
///
/// Required of a type `T` (each checked by its own `static_assert` in
/// `ddl::check_transport<T>()`):
///   - `typename T::request` — move-only handle; destroying an incomplete
///     request cancels it (no transfer touches its memory afterwards);
///   - `int rank() const`, `int size() const`;
///   - `request isend(int peer, ddl::const_bytes, ddl::tag)`;
///   - `request irecv(int peer, ddl::mutable_bytes, ddl::tag)`;
///   - `void wait(request&, ddl::deadline)` — throws `ddl::timeout_error`
///     naming the peer once the deadline passes.
/// Matching: messages between two ranks with the same tag match in posting
/// order (FIFO per (sender, receiver, tag)); a send matched by a receive of
/// another size fails both with `transport_error` and the one text of
/// `detail::size_mismatch`. A communicator's tags carry its call's stamp
/// (`transport/stamp.hpp`): a transport that can see a peer's unmatched
/// messages should throw `mismatch_error` when one of the awaited call bears
/// another stamp (local, MPI and the simulator do). No strategy of ddl sends to its own rank (it
/// copies locally); a transport may reject `peer == rank()` (the simulator and
/// cuda_peer do) or carry it (local, MPI).
/// Optional capabilities (detected, used when present):
///   - `request irecv_reduce(int peer, mutable_bytes dst, const_bytes local,
///     ddl::reduction, ddl::tag)` — receive and combine in one pass,
///     `dst = local (op) received`; a shared-memory transport reads the
///     peer's buffer directly instead of copying it first;
///   - `bool test(request&)` — completes `request` if it can without
///     blocking (true when done), and throws as `wait` would when the group
///     is broken; needed by transports layered on others, by the
///     multi-ring pipelined across levels (`strategy/pipeline.hpp`) and by
///     the communicator's `send`/`recv` (polled while parked);
///   - `request irecv_any(mutable_bytes, ddl::tag)` (with `test`), and
///     `int peer() const` on its request — a receive from whichever rank
///     sends first under the tag (`MPI_ANY_SOURCE`); once it has completed,
///     `peer()` is the sender. Receives match in posting order, those from
///     one rank and those from any alike (a message goes to the oldest
///     receive it fits); messages from one sender in the order they were
///     posted. Local, MPI and the simulator have it; the communicator's `recv_any` needs it;
///   - `void await_progress()` — blocks until one of this rank's requests
///     may have completed (threads: a peer's doorbell, at most 2 ms; the
///     simulator: its ranks are fibers in virtual time); transports without
///     it are polled with `test` and a back-off;
///   - `std::size_t eager_bytes(int peer) const` — the largest payload a
///     message to or from `peer` carries without a handshake (0: unknown);
///     the step engine sends a slice of a few such sizes as several eager
///     messages in flight at once (`step_machine`). Must be the same on
///     both ranks of a pair: it decides how both cut their messages;
///     `group_view` forwards it (rings and the multi-ring run on group views);
///   - `std::size_t piece_bytes(int peer) const` — the largest message worth
///     sending to or receiving from `peer` in one piece (0: any size); the
///     step engine cuts every slice for `peer` into pieces no larger (a
///     handshake that would queue behind bulk data on a socket is avoided:
///     MPI ranks on other machines over TCP). Must be the same on both ranks
///     of a pair; `group_view` forwards it;
///   - `static constexpr bool device_memory` — may be handed CUDA memory;
///   - `Host& host()`, `bool bounces(std::size_t bytes) const`, `std::byte*
///     bounce_buffer(std::size_t bytes)` and `void bounce_copy(std::byte* dst,
///     const std::byte* src, std::size_t n, const ddl::location& where,
///     ddl::deadline)` (with `device_memory`; `staged_transport`) — the
///     transport moves device buffers through a host transport `host()`: a
///     call of `bytes` per rank that `bounces` runs there whole (the
///     communicator copies the device buffer into `bounce_buffer` once with
///     `bounce_copy`, runs the strategy on `host()`, copies the result back)
///     instead of piece by piece. `bounces` must answer alike on every rank;
///   - `static constexpr bool peer_memory` — ranks share an address space:
///     a buffer address a rank sends in a message is valid for reading on the
///     receiving rank (threads of one process). Strategies that read their
///     peers' buffers in place (`ddl::one_shot`, `ddl::two_shot`) need it and
///     fail to compile without it; point-to-point strategies never look;
///   - `bool peers_readable() const` (with `peer_memory`) — whether every
///     rank can read every peer's buffers now (CUDA ranks on devices without
///     peer access cannot); without it, always. `group_view` forwards it;
///   - `static constexpr std::size_t flagged_bytes`, `bool flagged_ready()
///     const` and `void flagged_all_reduce(const std::byte* in, std::byte*
///     out, std::size_t count, ddl::reduction, ddl::tag stamp,
///     std::chrono::nanoseconds timeout)` (with `peer_memory`) — a whole
///     one_shot all-reduce of at most `flagged_bytes` per rank without a
///     message, synchronised through counters in memory the ranks share
///     (`cuda_peer_transport`: one kernel per rank spinning on its peers'
///     device counters); `ddl::one_shot` takes it where `flagged_ready()`.
///     The whole group only (`group_view` does not forward it);
///   - `void flagged_two_shot(...)`, the same arguments (with `peer_memory`
///     and `flagged_ready()`) — a whole two_shot all-reduce of any size
///     without a message, the ranks' buffers read where they lie
///     (`cuda_peer_transport`); `ddl::two_shot` takes it where
///     `flagged_ready()`. The whole group only; with either, optionally
///     `static constexpr double flagged_latency`, what a meeting through
///     the counters costs in step latencies (`cost::price_direct`; else 1);
///   - `std::byte* stage(std::size_t bytes)`, `const std::byte*
///     peer_stage(int peer, std::size_t bytes)` and `bool stages_shared()
///     const` — ranks that share memory through stages (MPI ranks of one
///     machine, in separate address spaces; threads, with `peer_memory`
///     too, for the small calls below): `stage` is this rank's, at least
///     `bytes` long (grown when shorter, its address may then change; host
///     memory, kept for the transport's life); `peer_stage` is rank `peer`'s
///     as mapped in this process, for its first `bytes` (the peer has grown
///     it that far and said so in a message); `stages_shared()` says
///     whether every rank can map every other's (the same answer on every
///     rank). Every stage holds at least its first 4 KiB from the start
///     (zeroed), so peers may map and watch them before the owner's first
///     call. Without `peer_memory` the direct strategies then run too: each
///     rank copies into its stage what its peers read;
///   - `bool stages_shared_among(int base, int stride, int size) const`
///     (with stages) — whether the members `base + i * stride` (i <
///     `size`) all map each other's stages, though not every rank does
///     (MPI ranks on several machines: the ranks of one machine do). The
///     same answer on every rank. `group_view` answers `stages_shared()`
///     with it, so a group inside one machine runs the direct strategies
///     (the multi-ring's first dimension through shared memory,
///     `multi_ring::direct_first`); without it a group view takes its
///     parent's `stages_shared()`;
///   - `const std::byte* peer_buffer(int peer, const detail::shared_region& r)`
///     (with stages) — region `r` of rank `peer`'s `ddl::shared_buffer`
///     (shm/shared_buffer.hpp), mapped in this process for reading:
///     the direct strategies then read a buffer that lies in one where it
///     lies, as over `peer_memory`, instead of a copy in the rank's stage.
///     Between ranks that share stages only; `group_view` forwards it;
///   - `bool memory_readable() const` and `void read_peer(int peer, const
///     std::byte* at, std::byte* dst, std::size_t bytes)` (with stages) —
///     whether every rank can copy from any address of every other's
///     process (MPI ranks of one machine: Linux cross-memory attach; the
///     same answer on every rank), and such a copy: `bytes` at `at`, an
///     address in rank `peer`'s process as the peer sent it, into `dst`
///     (one copy, by the kernel). `two_shot::reading_peers` then reads the
///     peers' plain buffers where they lie instead of copies in the stages
///     (`auto` measures it against them, `plan::reads`).
///     Optionally `bool memory_readable_among(int base, int stride, int
///     size) const`, as `stages_shared_among`; and `void write_peer(int
///     peer, const std::byte* src, std::byte* at, std::size_t bytes)`, the
///     copy the other way: `bytes` at `src` to `at`, an address in rank
///     `peer`'s process, where `memory_readable` (the direct broadcast of two
///     ranks splits its copy between them); `group_view` forwards them;
///   - `void wait_until(int peer, F ready, ddl::deadline, ddl::tag awaited)`
///     (with stages; `F` a callable returning bool) — polls `ready()`, a
///     look at `peer`'s stage, until it returns true, with everything `wait`
///     does while it waits for a message of `peer` tagged `awaited` (the
///     deadline and `timeout_error`, aborts, a dead peer, a peer's message of
///     the call under another stamp). With it `ddl::one_shot` synchronises
///     small calls through counters in the stages, without a message. A
///     transport offers it only where every rank's stage serves one group
///     (`group_view` does not forward it);
///   - `void stage_raised()` (with `wait_until`) — this rank has just raised
///     a counter in its stage that peers may be waiting on in `wait_until`:
///     a transport whose waiters sleep wakes them here, so a wait hands the
///     core to the rank it waits for instead of yielding it to whatever else
///     runs (ranks beside a busy process). A strategy that raises such a
///     counter calls it where the transport has it (`has_stage_raised_v`;
///     the direct strategies do); without the call a sleeping waiter still
///     sees the counter, up to 2 ms late on `local_transport` and
///     `mpi_transport`;
///   - `static constexpr bool stream_ordered` — transfers are queued in order
///     on a device stream and the calls only enqueue them: cutting a slice
///     into pipelined chunks overlaps nothing and costs host API calls per
///     chunk, so the step engine sends each slice as one message (such a
///     transport must offer `irecv_reduce`);
///   - `void abort(const std::string& why)` — this rank gives the group up:
///     every peer's pending and later waits end with `transport_error`
///     naming this rank and `why` (soon, not at their deadline), and so do
///     this rank's later calls. Idempotent; the first abort in the group is
///     the one reported. Called by the thread that drives the transport.
///     A communicator calls it when one of its calls fails on this rank
///     (and from `communicator::abort`), so peers stop waiting for it;
///   - `bool stamps_in_tags() const` — whether the communicator's call
///     stamps survive in this transport's tags (false: its tags are too
///     short to carry them: `mpi_transport` under an `MPI_TAG_UB` below
///     2^25 - 1). Where they do not, the communicator checks every call with
///     the `DDL_CHECK` round instead (`stamps_in_tags_of`), so a mismatch is
///     still caught; without the member, stamps are taken to survive.
///     `staged_transport` forwards its host transport's answer;
///   - `bool allows_progress_thread() const` — may a background thread drive
///     it (one thread at a time)? See `progress_thread_allowed`;
///   - `default_bandwidth`, `default_latency` (static) — link costs the
///     planner assumes when nobody measured them (`default_link`);
///   - `static constexpr double copy_step_factor` — a step that only copies
///     what it receives runs at this multiple of the links' bandwidth, which
///     prices a step that reduces it (`plan_for::copy_step`; the threads
///     declare 1.5: a copy moves 2 bytes of memory traffic, a fused
///     receive-and-reduce 3);
///   - `static constexpr double direct_read_factor`, `static constexpr bool
///     direct_round_one_step`, `static constexpr bool direct_reads_over_links`
///     (with `peer_memory` or stages) — how the planner prices the direct
///     strategies over it (`plan_for::direct_read`,
///     `plan_for::direct_round_one_step`, `plan_for::direct_over_links`;
///     MPI declares the first two, the simulator the third). `group_view`
///     forwards these four and the default link costs;
///   - `ddl::topology topology() const` — the group's levels and link costs,
///     where the transport knows them (the simulator's network; CUDA peers,
///     whose step latency grows with the ranks): `auto` and the broadcast
///     price on them (`has_topology_v`);
///   - `ddl::memory_ops memory(const ddl::location&)` — the local copies and
///     reductions for buffers at that location (see `core/memory.hpp`);
///     `group_view` forwards it.
#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "ddl/core/buffer.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/core/op.hpp"
#include "ddl/reduce/host.hpp"
#include "ddl/shm/shared_buffer.hpp"

namespace ddl {

/// Message tag: keeps concurrent collectives and phases apart.
using tag = std::uint64_t;
/// Absolute time by which a wait must complete.
using deadline = std::chrono::steady_clock::time_point;

namespace detail {
template <class T, class = void>
struct has_request : std::false_type {};
template <class T>
struct has_request<T, std::void_t<typename T::request>> : std::true_type {};

template <class T, class = void>
struct has_rank : std::false_type {};
template <class T>
struct has_rank<T, std::enable_if_t<std::is_convertible_v<decltype(std::declval<const T&>().rank()), int>>>
    : std::true_type {};

template <class T, class = void>
struct has_size : std::false_type {};
template <class T>
struct has_size<T, std::enable_if_t<std::is_convertible_v<decltype(std::declval<const T&>().size()), int>>>
    : std::true_type {};

template <class T, class = void>
struct has_isend : std::false_type {};
template <class T>
struct has_isend<T, std::enable_if_t<std::is_same_v<
                        decltype(std::declval<T&>().isend(0, const_bytes{}, tag{})), typename T::request>>>
    : std::true_type {};

template <class T, class = void>
struct has_irecv : std::false_type {};
template <class T>
struct has_irecv<T, std::enable_if_t<std::is_same_v<
                        decltype(std::declval<T&>().irecv(0, mutable_bytes{}, tag{})), typename T::request>>>
    : std::true_type {};

template <class T, class = void>
struct has_wait : std::false_type {};
template <class T>
struct has_wait<T, std::void_t<decltype(std::declval<T&>().wait(std::declval<typename T::request&>(),
                                                                 deadline{}))>> : std::true_type {};

template <class T, class = void>
struct has_irecv_reduce : std::false_type {};
template <class T>
struct has_irecv_reduce<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<T&>().irecv_reduce(
                                           0, mutable_bytes{}, const_bytes{}, reduction{}, tag{})),
                                       typename T::request>>> : std::true_type {};

template <class T, class = void>
struct has_test : std::false_type {};
template <class T>
struct has_test<T, std::enable_if_t<std::is_same_v<decltype(std::declval<T&>().test(std::declval<typename T::request&>())),
                                                   bool>>> : std::true_type {};

template <class T, class = void>
struct has_irecv_any : std::false_type {};
template <class T>
struct has_irecv_any<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<T&>().irecv_any(mutable_bytes{}, tag{})),
                                       typename T::request> &&
                        std::is_convertible_v<decltype(std::declval<const typename T::request&>().peer()), int>>>
    : std::true_type {};

template <class T, class = void>
struct has_device_memory : std::false_type {};
template <class T>
struct has_device_memory<T, std::enable_if_t<T::device_memory>> : std::true_type {};

template <class T, class = void>
struct has_peer_memory : std::false_type {};
template <class T>
struct has_peer_memory<T, std::enable_if_t<T::peer_memory>> : std::true_type {};

template <class T, class = void>
struct has_direct_read_factor : std::false_type {};
template <class T>
struct has_direct_read_factor<T, std::void_t<decltype(T::direct_read_factor)>> : std::true_type {};

template <class T, class = void>
struct has_flagged_latency : std::false_type {};
template <class T>
struct has_flagged_latency<T, std::void_t<decltype(T::flagged_latency)>> : std::true_type {};

template <class T, class = void>
struct has_copy_step_factor : std::false_type {};
template <class T>
struct has_copy_step_factor<T, std::void_t<decltype(T::copy_step_factor)>> : std::true_type {};

template <class T, class = void>
struct has_peers_readable : std::false_type {};
template <class T>
struct has_peers_readable<T, std::enable_if_t<std::is_same_v<decltype(std::declval<const T&>().peers_readable()), bool>>>
    : std::true_type {};

template <class T, class = void>
struct has_flagged_all_reduce : std::false_type {};
template <class T>
struct has_flagged_all_reduce<
    T, std::void_t<decltype(T::flagged_bytes), decltype(std::declval<const T&>().flagged_ready()),
                   decltype(std::declval<T&>().flagged_all_reduce(std::declval<const std::byte*>(),
                                                                  std::declval<std::byte*>(), std::size_t{}, reduction{},
                                                                  tag{}, std::chrono::nanoseconds{}))>>
    : std::true_type {};

template <class T, class = void>
struct has_flagged_two_shot : std::false_type {};
template <class T>
struct has_flagged_two_shot<
    T, std::void_t<decltype(std::declval<const T&>().flagged_ready()),
                   decltype(std::declval<T&>().flagged_two_shot(std::declval<const std::byte*>(),
                                                                std::declval<std::byte*>(), std::size_t{}, reduction{},
                                                                tag{}, std::chrono::nanoseconds{}))>>
    : std::true_type {};

template <class T, class = void>
struct has_peer_stage : std::false_type {};
template <class T>
struct has_peer_stage<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<T&>().stage(std::size_t{})), std::byte*> &&
                        std::is_same_v<decltype(std::declval<T&>().peer_stage(0, std::size_t{})), const std::byte*> &&
                        std::is_same_v<decltype(std::declval<const T&>().stages_shared()), bool>>> : std::true_type {};

template <class T, class = void>
struct has_stages_among : std::false_type {};
template <class T>
struct has_stages_among<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<const T&>().stages_shared_among(0, 1, 1)), bool>>>
    : std::true_type {};

template <class T, class = void>
struct has_peer_buffer : std::false_type {};
template <class T>
struct has_peer_buffer<T, std::enable_if_t<std::is_same_v<
                              decltype(std::declval<T&>().peer_buffer(0, std::declval<const detail::shared_region&>())),
                              const std::byte*>>> : std::true_type {};
template <class T, class = void>
struct has_read_peer : std::false_type {};
template <class T>
struct has_read_peer<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<const T&>().memory_readable()), bool>,
                        std::void_t<decltype(std::declval<T&>().read_peer(0, std::declval<const std::byte*>(),
                                                                           std::declval<std::byte*>(), std::size_t{}))>>>
    : std::true_type {};
template <class T, class = void>
struct has_write_peer : std::false_type {};
template <class T>
struct has_write_peer<T, std::void_t<decltype(std::declval<T&>().write_peer(0, std::declval<const std::byte*>(),
                                                                            std::declval<std::byte*>(), std::size_t{}))>>
    : std::true_type {};
template <class T, class = void>
struct has_memory_readable_among : std::false_type {};
template <class T>
struct has_memory_readable_among<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<const T&>().memory_readable_among(0, 1, 1)), bool>>>
    : std::true_type {};
template <class T, class = void>
struct has_wait_until : std::false_type {};
template <class T>
struct has_wait_until<T, std::void_t<decltype(std::declval<T&>().wait_until(0, std::declval<bool (*)()>(), deadline{},
                                                                            tag{}))>> : std::true_type {};

template <class T, class = void>
struct has_stage_raised : std::false_type {};
template <class T>
struct has_stage_raised<T, std::void_t<decltype(std::declval<T&>().stage_raised())>> : std::true_type {};

template <class T, class = void>
struct has_host_bounce : std::false_type {};
template <class T>
struct has_host_bounce<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<const T&>().bounces(std::size_t{})), bool> &&
                        std::is_same_v<decltype(std::declval<T&>().bounce_buffer(std::size_t{})), std::byte*>,
                        std::void_t<decltype(std::declval<T&>().host()),
                                    decltype(std::declval<T&>().bounce_copy(
                                        std::declval<std::byte*>(), std::declval<const std::byte*>(), std::size_t{},
                                        std::declval<const location&>(), deadline{}))>>> : std::true_type {};

template <class T, class = void>
struct has_stream_order : std::false_type {};
template <class T>
struct has_stream_order<T, std::enable_if_t<T::stream_ordered>> : std::true_type {};

template <class T, class = void>
struct has_eager_bytes : std::false_type {};
template <class T>
struct has_eager_bytes<
    T, std::enable_if_t<std::is_convertible_v<decltype(std::declval<const T&>().eager_bytes(0)), std::size_t>>>
    : std::true_type {};

template <class T, class = void>
struct has_piece_bytes : std::false_type {};
template <class T>
struct has_piece_bytes<
    T, std::enable_if_t<std::is_convertible_v<decltype(std::declval<const T&>().piece_bytes(0)), std::size_t>>>
    : std::true_type {};

template <class T, class = void>
struct has_await_progress : std::false_type {};
template <class T>
struct has_await_progress<T, std::void_t<decltype(std::declval<T&>().await_progress())>> : std::true_type {};

template <class T, class = void>
struct has_topology : std::false_type {};
template <class T>
struct has_topology<T, std::void_t<decltype(std::declval<const T&>().topology())>> : std::true_type {};
template <class T, class = void>
struct has_abort : std::false_type {};
template <class T>
struct has_abort<T, std::void_t<decltype(std::declval<T&>().abort(std::declval<const std::string&>()))>>
    : std::true_type {};
}  // namespace detail

/// True when `T` models the Transport concept.
template <class T>
inline constexpr bool is_transport_v =
    detail::has_request<T>::value && detail::has_rank<T>::value && detail::has_size<T>::value &&
    detail::has_isend<T>::value && detail::has_irecv<T>::value && detail::has_wait<T>::value;

/// True when `T` can receive and reduce in one pass (`irecv_reduce`).
template <class T>
inline constexpr bool has_fused_reduce_v = detail::has_irecv_reduce<T>::value;

/// True when `T` can complete a request without blocking (`test`).
template <class T>
inline constexpr bool has_test_v = detail::has_test<T>::value;

/// True when `T` can receive from whichever rank sends first (`irecv_any`).
template <class T>
inline constexpr bool has_irecv_any_v = detail::has_irecv_any<T>::value;

/// True when `T` may be handed device (CUDA) memory.
template <class T>
inline constexpr bool accepts_device_memory_v = detail::has_device_memory<T>::value;

/// True when `T`'s ranks can read each other's buffers in place (`peer_memory`).
template <class T>
inline constexpr bool has_peer_memory_v = detail::has_peer_memory<T>::value;

/// True when `T`'s ranks may share memory through stages (`stage`,
/// `peer_stage`, `stages_shared`).
template <class T>
inline constexpr bool has_peer_stage_v = detail::has_peer_stage<T>::value;

/// True when `T` has stages and says which of its groups share them
/// (`stages_shared_among`).
template <class T>
inline constexpr bool has_stages_among_v = has_peer_stage_v<T> && detail::has_stages_among<T>::value;

/// True when `T` runs calls that `bounces` accepts whole on its host
/// transport `host()` (`staged_transport`).
template <class T>
inline constexpr bool has_host_bounce_v = detail::has_host_bounce<T>::value;

/// True when `T` has stages and maps its peers' `shared_buffer`s (`peer_buffer`).
template <class T>
inline constexpr bool has_peer_buffer_v = has_peer_stage_v<T> && detail::has_peer_buffer<T>::value;

/// True when `T` has stages and copies from its peers' memory at any
/// address (`memory_readable`, `read_peer`).
template <class T>
inline constexpr bool has_read_peer_v = has_peer_stage_v<T> && detail::has_read_peer<T>::value;
/// Whether `T` also copies into its peers' memory (`write_peer`, with `read_peer`).
template <class T>
inline constexpr bool has_write_peer_v = has_read_peer_v<T> && detail::has_write_peer<T>::value;

/// True when `T` has stages and can wait on a peer's (`wait_until`).
template <class T>
inline constexpr bool has_wait_until_v = has_peer_stage_v<T> && detail::has_wait_until<T>::value;

/// True when `T` waits on stages (`wait_until`) and wants to hear when a
/// rank raised a counter in its own (`stage_raised`).
template <class T>
inline constexpr bool has_stage_raised_v = has_wait_until_v<T> && detail::has_stage_raised<T>::value;

/// True when `T` says a read of a peer's stage crosses its links, its own
/// memory being free (`direct_reads_over_links`: the simulator): the
/// planner prices the direct strategies so, and two_shot and the direct
/// all-gather take plain buffers through the stage whole, not in
/// cache-sized segments (`direct_base::stage_segment`).
template <class T, class = void>
struct direct_reads_over_links : std::false_type {};
template <class T>
struct direct_reads_over_links<T, std::void_t<decltype(T::direct_reads_over_links)>>
    : std::bool_constant<T::direct_reads_over_links> {};
template <class T>
inline constexpr bool direct_reads_over_links_v = direct_reads_over_links<T>::value;

/// True when `T` says a direct strategy's synchronisation round costs one
/// step's latency, not ceil(log2 n) of them (`direct_round_one_step`: MPI).
template <class T, class = void>
struct direct_round_one_step : std::false_type {};
template <class T>
struct direct_round_one_step<T, std::void_t<decltype(T::direct_round_one_step)>>
    : std::bool_constant<T::direct_round_one_step> {};
template <class T>
inline constexpr bool direct_round_one_step_v = direct_round_one_step<T>::value;

/// True when `T` runs small one_shot all-reduces through shared counters
/// without a message (`flagged_all_reduce`).
template <class T>
inline constexpr bool has_flagged_all_reduce_v = has_peer_memory_v<T> && detail::has_flagged_all_reduce<T>::value;

/// True when `T` runs whole two_shot all-reduces through shared counters
/// without a message (`flagged_two_shot`).
template <class T>
inline constexpr bool has_flagged_two_shot_v = has_peer_memory_v<T> && detail::has_flagged_two_shot<T>::value;

/// True when `T`'s ranks can get at each other's memory, their buffers in
/// place (`peer_memory`) or shared stages: the direct strategies compile over it.
template <class T>
inline constexpr bool reaches_peers_v = has_peer_memory_v<T> || has_peer_stage_v<T>;

/// Whether every rank of `t`'s group can get at its peers' memory now:
/// with `peer_memory` its `peers_readable()` where it has one, else
/// always; `t.stages_shared()` with stages.
template <class T>
bool peers_reachable(const T& t) {
  if constexpr (has_peer_memory_v<T>) {
    if constexpr (detail::has_peers_readable<T>::value) return t.peers_readable();
    (void)t;
    return true;
  } else if constexpr (has_peer_stage_v<T>) {
    return t.stages_shared();
  } else {
    (void)t;
    return false;
  }
}

/// True when `T` queues its transfers in order on a device stream (one
/// message per slice; see `stream_ordered` above).
template <class T>
inline constexpr bool is_stream_ordered_v = detail::has_stream_order<T>::value;

/// True when `T` says how large a message goes without a handshake (`eager_bytes`).
template <class T>
inline constexpr bool has_eager_bytes_v = detail::has_eager_bytes<T>::value;

/// True when `T` caps the size of a message to a peer (`piece_bytes`).
template <class T>
inline constexpr bool has_piece_bytes_v = detail::has_piece_bytes<T>::value;

/// True when `T` can block until one of its requests may have moved
/// (`await_progress`), so a caller driving many requests with `test` sleeps
/// instead of polling.
template <class T>
inline constexpr bool has_await_progress_v = detail::has_await_progress<T>::value;

/// True when `T` knows its group's levels and link costs (`topology()`).
template <class T>
inline constexpr bool has_topology_v = detail::has_topology<T>::value;

/// True when `T` can tell its peers that this rank gave up (`abort`).
template <class T>
inline constexpr bool has_abort_v = detail::has_abort<T>::value;

namespace detail {
template <class T, class = void>
struct has_stamps_in_tags : std::false_type {};
template <class T>
struct has_stamps_in_tags<T, std::void_t<decltype(bool(std::declval<const T&>().stamps_in_tags()))>> : std::true_type {};
}  // namespace detail

/// Whether the call stamps of a communicator over `t` reach the peers in its
/// tags (`stamps_in_tags`; true for a transport that does not say).
template <class T>
bool stamps_in_tags_of(const T& t) {
  if constexpr (detail::has_stamps_in_tags<T>::value) return t.stamps_in_tags();
  else return (void)t, true;
}

/// Compile-time check with one message per missing requirement; use it where
/// a transport type enters the library: `static_assert(ddl::check_transport<T>());`
template <class T>
constexpr bool check_transport() {
  static_assert(detail::has_request<T>::value,
                "ddl: transport is missing member type 'request' (a move-only handle)");
  static_assert(detail::has_rank<T>::value, "ddl: transport is missing member 'int rank() const'");
  static_assert(detail::has_size<T>::value, "ddl: transport is missing member 'int size() const'");
  static_assert(detail::has_isend<T>::value,
                "ddl: transport is missing member 'request isend(int, ddl::const_bytes, ddl::tag)'");
  static_assert(detail::has_irecv<T>::value,
                "ddl: transport is missing member 'request irecv(int, ddl::mutable_bytes, ddl::tag)'");
  static_assert(detail::has_wait<T>::value,
                "ddl: transport is missing member 'void wait(request&, ddl::deadline)'");
  return is_transport_v<T>;
}

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// C++20 spelling of the same requirement.
template <class T>
concept transport = is_transport_v<T>;
#endif

namespace detail {
template <class T, class = void>
struct has_memory : std::false_type {};
template <class T>
struct has_memory<T, std::enable_if_t<std::is_same_v<decltype(std::declval<T&>().memory(location{})), memory_ops>>>
    : std::true_type {};
}  // namespace detail

/// True when `T` supplies its own local memory operations.
template <class T>
inline constexpr bool has_memory_ops_v = detail::has_memory<T>::value;

/// The operations for buffers at `where` on transport `t`.
template <class Transport>
memory_ops memory_for(Transport& t, const location& where) {
  if constexpr (has_memory_ops_v<Transport>) {
    return t.memory(where);
  } else {
    (void)t;
    (void)where;
    return host_memory_ops();
  }
}

/// Link costs a transport assumes when nobody measured or described them:
/// `T::default_bandwidth` (bytes/s) and `T::default_latency` (s) when the
/// transport declares them, else 1 GB/s and 10 us.
template <class T, class = void>
struct default_link {
  static constexpr double bandwidth = 1e9, latency = 10e-6;
};
template <class T>
struct default_link<T, std::void_t<decltype(T::default_bandwidth), decltype(T::default_latency)>> {
  static constexpr double bandwidth = T::default_bandwidth, latency = T::default_latency;
};

namespace detail {
template <class T, class = void>
struct has_progress_query : std::false_type {};
template <class T>
struct has_progress_query<T, std::enable_if_t<std::is_convertible_v<
                                 decltype(std::declval<const T&>().allows_progress_thread()), bool>>>
    : std::true_type {};
}  // namespace detail

/// Whether another thread than the one that created `t` may drive it (one
/// thread at a time), so asynchronous collectives can progress in the
/// background: `t.allows_progress_thread()` when the transport says, else true
/// for host-only transports and false for device ones (CUDA binds a device
/// per thread).
template <class T>
bool progress_thread_allowed(const T& t) {
  if constexpr (detail::has_progress_query<T>::value) return t.allows_progress_thread();
  else {
    (void)t;
    return !accepts_device_memory_v<T>;
  }
}

}  // namespace ddl
