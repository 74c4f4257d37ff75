#pragma once
/// \file
/// The Transport concept's optional capabilities of ranks that reach each
/// other's memory (`transport/capabilities.hpp` has the rest): buffers read
/// in place (`peer_memory`), flagged calls, stages and their waits, and the
/// direct strategies' cost hints. Each detected by a trait, used when
/// present.
///
/// Optional capabilities:
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
///   - `bool device_peers() const`, `bool share_device(const std::byte* p,
///     std::size_t n, ddl::device_region& r)`, `const std::byte*
///     peer_device(int peer, const ddl::device_region& r)`, `std::byte*
///     take_scratch(std::size_t n)` and `void give_scratch(const std::byte*
///     p)` — processes whose device memory maps into each other's
///     (`staged_transport`'s near ranks, CUDA IPC; `staged/device_region.hpp`):
///     whether every pair of the group does (the same answer on every rank);
///     where device buffer `[p, p + n)` lies, for the peers (false: memory
///     they cannot map, such as a `cudaMallocAsync` pool's); rank `peer`'s
///     region `r`, mapped here (its first byte past `r.offset`); and device
///     memory `share_device` accepts, held until given back. `ddl::one_shot`
///     and `ddl::two_shot` then run every collective on device buffers
///     reading the peers' where they lie (`detail::direct_device`), and a
///     `direct_first` multi-ring its first dimension. Optionally `bool
///     device_peers_among(int base, int stride, int size) const`, as
///     `stages_shared_among`; `group_view` forwards them all;
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
///     forwards these four and the default link costs.
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "ddl/core/device_region.hpp"
#include "ddl/transport/capabilities.hpp"

namespace ddl {

namespace detail {
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

}  // namespace detail

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

template <class T, class = void>
struct has_device_peers : std::false_type {};
template <class T>
struct has_device_peers<
    T, std::void_t<decltype(bool(std::declval<const T&>().device_peers())),
                   decltype(bool(std::declval<T&>().share_device(std::declval<const std::byte*>(), std::size_t{},
                                                                std::declval<device_region&>()))),
                   decltype(static_cast<const std::byte*>(
                       std::declval<T&>().peer_device(0, std::declval<const device_region&>()))),
                   decltype(static_cast<std::byte*>(std::declval<T&>().take_scratch(std::size_t{}))),
                   decltype(std::declval<T&>().give_scratch(std::declval<const std::byte*>()))>> : std::true_type {};
/// True when `T`'s ranks map each other's device memory between processes
/// (`device_peers`, `share_device`, `peer_device`, `take_scratch`, `give_scratch`).
template <class T>
inline constexpr bool has_device_peers_v = has_device_peers<T>::value;

namespace detail {
template <class T, class = void>
struct has_device_peers_among : std::false_type {};
template <class T>
struct has_device_peers_among<
    T, std::enable_if_t<std::is_same_v<decltype(std::declval<const T&>().device_peers_among(0, 1, 1)), bool>>>
    : std::true_type {};
}  // namespace detail

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

}  // namespace ddl
