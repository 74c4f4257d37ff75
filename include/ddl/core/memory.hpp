#pragma once
/// \file
/// Local memory operations: the copies, reductions and workspace a strategy
/// needs on its own rank's buffers. Strategies never call `memcpy` or the
/// host kernels directly; they go through a `memory_ops` table chosen per call
/// from the buffers' location, so the same strategy code runs on host memory,
/// on CUDA device memory (the CUDA back-end's table launches kernels on the
/// buffer's stream) and on the simulator's phantom buffers (no data at all).
///
/// A transport may provide `ddl::memory_ops memory(const ddl::location&)`;
/// without it, host buffers get `host_memory_ops()`.
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "../reduce/host.hpp"
#include "buffer.hpp"
#include "op.hpp"

namespace ddl {

/// A table of local memory operations over one kind of memory. `ctx` is
/// handed back to every function (e.g. a CUDA stream, a simulator).
struct memory_ops {
  const char* name = "host";
  void* ctx = nullptr;
  /// `bytes` from `src` to `dst`; the ranges may overlap.
  void (*copy)(void* ctx, std::byte* dst, const std::byte* src, std::size_t bytes) = nullptr;
  /// `dst[i] = a[i] (op) b[i]`; `dst` equals `a` or `b`, or overlaps neither.
  void (*reduce)(void* ctx, std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count,
                 reduction r) = nullptr;
  /// What the op does once the reduction is complete (`avg` divides by `ranks`).
  void (*finalize)(void* ctx, std::byte* data, std::size_t count, reduction r, int ranks) = nullptr;
  /// Workspace of `bytes` in this memory (uninitialised), and its release.
  std::byte* (*allocate)(void* ctx, std::size_t bytes) = nullptr;
  void (*release)(void* ctx, std::byte* p, std::size_t bytes) = nullptr;
};

/// The table for host memory: `memmove`, the host kernels, `new[]`.
inline memory_ops host_memory_ops() noexcept {
  memory_ops m;
  m.name = "host";
  m.copy = [](void*, std::byte* dst, const std::byte* src, std::size_t n) {
    if (n && dst != src) std::memmove(dst, src, n);
  };
  m.reduce = [](void*, std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, reduction r) {
    host::reduce(dst, a, b, count, r);
  };
  m.finalize = [](void*, std::byte* p, std::size_t count, reduction r, int ranks) {
    host::finalize(p, count, r, ranks);
  };
  m.allocate = [](void*, std::size_t n) { return new std::byte[n]; };
  m.release = [](void*, std::byte* p, std::size_t) { delete[] p; };
  return m;
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

}  // namespace ddl
