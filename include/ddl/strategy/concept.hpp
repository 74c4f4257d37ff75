#pragma once
/// \file
/// The Strategy concept: what a type must provide to be the `Strategy` of a
/// `ddl::communicator`. A strategy is the algorithm; it is handed a transport
/// (or a group view of one), raw validated pointers, an element count and a
/// `ddl::call_context`, and writes itself in the step vocabulary of
/// `strategy/step.hpp` (`ddl::steps::send`, `recv_reduce`, ...).
///
/// Required of a type `S`, for a transport `T` (each checked by its own
/// `static_assert` in `ddl::check_strategy<S, T>()`):
///   - `static constexpr const char* name` — for messages ("ring");
///   - `void validate(int ranks)` (or `validate(const T&)`) — throws
///     `ddl::topology_error` if it cannot run on that many ranks;
///   - `std::size_t all_reduce_workspace(std::size_t count, ddl::dtype, int ranks)`
///     and `reduce_scatter_workspace(...)` — bytes of `call_context::work`
///     each collective needs (0 for none);
///   - `void all_reduce(T&, const std::byte* in, std::byte* out, std::size_t count, const call_context&)`
///     (`in == out` for in place) — every rank's `out` = the reduction of
///     every rank's `in`, finalised (`local_finalize`: `avg` divides);
///   - `void reduce_scatter(T&, const std::byte* in, std::byte* work, std::byte* out, std::size_t count, const call_context&)`
///     — `out` = this rank's block (`ddl::block_of`) of the reduction;
///     `work` is `count` elements of scratch (it may be `in`: in place);
///   - `void all_gather(T&, const std::byte* own, std::byte* out, std::size_t count, const call_context&)`
///     — `out` (`count` elements) = every rank's block in rank order.
/// Optional: `const ddl::topology& topo() const` — the levels and link costs
/// the strategy prices its plans on (`auto_strategy`: `DDL_TOPOLOGY`, the
/// probe's, or the transport's); the communicator prices broadcasts on them
/// too (`has_topo_v`).
/// `examples/custom_strategy.cpp` writes one.
#include <cstddef>
#include <type_traits>
#include <utility>

#include "ddl/core/dtype.hpp"
#include "ddl/strategy/step.hpp"
#include "ddl/transport/concept.hpp"

namespace ddl {
namespace detail {

template <class S, class = void>
struct has_name : std::false_type {};
template <class S>
struct has_name<S, std::enable_if_t<std::is_convertible_v<decltype(S::name), const char*>>> : std::true_type {};

template <class S, class T, class = void>
struct has_validate : std::false_type {};
template <class S, class T>
struct has_validate<S, T, std::void_t<decltype(std::declval<S&>().validate(0))>> : std::true_type {};
template <class S, class T, class = void>
struct has_validate_transport : std::false_type {};
template <class S, class T>
struct has_validate_transport<S, T, std::void_t<decltype(std::declval<S&>().validate(std::declval<T&>()))>>
    : std::true_type {};

template <class S, class = void>
struct has_all_reduce_workspace : std::false_type {};
template <class S>
struct has_all_reduce_workspace<
    S, std::enable_if_t<std::is_convertible_v<
           decltype(std::declval<const S&>().all_reduce_workspace(std::size_t{}, dtype{}, 0)), std::size_t>>>
    : std::true_type {};

template <class S, class = void>
struct has_reduce_scatter_workspace : std::false_type {};
template <class S>
struct has_reduce_scatter_workspace<
    S, std::enable_if_t<std::is_convertible_v<
           decltype(std::declval<const S&>().reduce_scatter_workspace(std::size_t{}, dtype{}, 0)), std::size_t>>>
    : std::true_type {};

template <class S, class T, class = void>
struct has_all_reduce : std::false_type {};
template <class S, class T>
struct has_all_reduce<S, T,
                      std::void_t<decltype(std::declval<S&>().all_reduce(
                          std::declval<T&>(), std::declval<const std::byte*>(), std::declval<std::byte*>(),
                          std::size_t{}, std::declval<const call_context&>()))>> : std::true_type {};

template <class S, class T, class = void>
struct has_reduce_scatter : std::false_type {};
template <class S, class T>
struct has_reduce_scatter<
    S, T,
    std::void_t<decltype(std::declval<S&>().reduce_scatter(std::declval<T&>(), std::declval<const std::byte*>(),
                                                           std::declval<std::byte*>(), std::declval<std::byte*>(),
                                                           std::size_t{}, std::declval<const call_context&>()))>>
    : std::true_type {};

template <class S, class T, class = void>
struct has_all_gather : std::false_type {};
template <class S, class T>
struct has_all_gather<S, T,
                      std::void_t<decltype(std::declval<S&>().all_gather(
                          std::declval<T&>(), std::declval<const std::byte*>(), std::declval<std::byte*>(),
                          std::size_t{}, std::declval<const call_context&>()))>> : std::true_type {};

template <class S, class = void>
struct has_topo : std::false_type {};
template <class S>
struct has_topo<S, std::void_t<decltype(std::declval<const S&>().topo())>> : std::true_type {};

}  // namespace detail

/// True when strategy `S` says which topology it prices its plans on (`topo()`).
template <class S>
inline constexpr bool has_topo_v = detail::has_topo<S>::value;

/// True when `S` models the Strategy concept over transport `T`.
template <class S, class T>
inline constexpr bool is_strategy_v =
    detail::has_name<S>::value &&
    (detail::has_validate<S, T>::value || detail::has_validate_transport<S, T>::value) &&
    detail::has_all_reduce_workspace<S>::value && detail::has_reduce_scatter_workspace<S>::value &&
    detail::has_all_reduce<S, T>::value && detail::has_reduce_scatter<S, T>::value &&
    detail::has_all_gather<S, T>::value;

/// Compile-time check with one message per missing requirement:
/// `static_assert(ddl::check_strategy<my_strategy, my_transport>());`
template <class S, class T>
constexpr bool check_strategy() {
  static_assert(detail::has_name<S>::value,
                "ddl: strategy is missing 'static constexpr const char* name'");
  static_assert(detail::has_validate<S, T>::value || detail::has_validate_transport<S, T>::value,
                "ddl: strategy is missing 'void validate(int ranks)' (or validate(const Transport&))");
  static_assert(detail::has_all_reduce_workspace<S>::value,
                "ddl: strategy is missing 'std::size_t all_reduce_workspace(std::size_t, ddl::dtype, int)'");
  static_assert(detail::has_reduce_scatter_workspace<S>::value,
                "ddl: strategy is missing 'std::size_t reduce_scatter_workspace(std::size_t, ddl::dtype, int)'");
  static_assert(detail::has_all_reduce<S, T>::value,
                "ddl: strategy is missing 'void all_reduce(Transport&, const std::byte*, std::byte*, std::size_t, "
                "const ddl::call_context&)'");
  static_assert(detail::has_reduce_scatter<S, T>::value,
                "ddl: strategy is missing 'void reduce_scatter(Transport&, const std::byte*, std::byte*, std::byte*, "
                "std::size_t, const ddl::call_context&)'");
  static_assert(detail::has_all_gather<S, T>::value,
                "ddl: strategy is missing 'void all_gather(Transport&, const std::byte*, std::byte*, std::size_t, "
                "const ddl::call_context&)'");
  return is_strategy_v<S, T>;
}

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// C++20 spelling of the same requirement.
template <class S, class T>
concept strategy_for = is_strategy_v<S, T>;
#endif

}  // namespace ddl
