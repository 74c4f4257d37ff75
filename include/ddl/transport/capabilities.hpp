#pragma once
/// \file
/// The Transport concept's optional capabilities (`transport/concept.hpp`
/// has the required members), each detected by a trait and used when present.
///
/// Optional capabilities (those of ranks that reach each other's memory,
/// the direct strategies' ground, are in `transport/peer_access.hpp`):
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

#include "ddl/transport/concept.hpp"

namespace ddl {

namespace detail {
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

/// True when `T` runs calls that `bounces` accepts whole on its host
/// transport `host()` (`staged_transport`).
template <class T>
inline constexpr bool has_host_bounce_v = detail::has_host_bounce<T>::value;


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

#include "ddl/transport/peer_access.hpp"
