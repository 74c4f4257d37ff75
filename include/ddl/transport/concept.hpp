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
/// Optional capabilities (detected, used when present: `irecv_reduce`,
/// `test`, stages, device memory, flagged calls, ...) are listed in
/// `transport/capabilities.hpp`, with the traits that detect them.
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

}  // namespace detail

/// True when `T` models the Transport concept.
template <class T>
inline constexpr bool is_transport_v =
    detail::has_request<T>::value && detail::has_rank<T>::value && detail::has_size<T>::value &&
    detail::has_isend<T>::value && detail::has_irecv<T>::value && detail::has_wait<T>::value;

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

}  // namespace ddl

// The optional capabilities and their traits.
#include "ddl/transport/capabilities.hpp"
