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
/// without it, host buffers get `host_memory_ops()` (`reduce/host.hpp`).
#include <cstddef>
#include <functional>

#include "ddl/core/buffer.hpp"
#include "ddl/core/op.hpp"

namespace ddl {

/// A table of local memory operations over one kind of memory. `ctx` is
/// handed back to every function (e.g. a CUDA stream, a simulator).
struct memory_ops {
  const char* name = "host";
  void* ctx = nullptr;
  /// `bytes` from `src` to `dst`; the ranges may overlap.
  void (*copy)(void* ctx, std::byte* dst, const std::byte* src, std::size_t bytes) = nullptr;
  /// Optional: `bytes` from `src` to `dst` (ranges apart) without keeping
  /// the written lines in this core's cache (streaming stores), for memory
  /// another core reads next (a shared stage); strategies fall back to
  /// `copy` where it is null.
  void (*stream_copy)(void* ctx, std::byte* dst, const std::byte* src, std::size_t bytes) = nullptr;
  /// `dst[i] = a[i] (op) b[i]`; `dst` equals `a` or `b`, or overlaps neither.
  void (*reduce)(void* ctx, std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count,
                 reduction r) = nullptr;
  /// `dst[i] = src[0][i] (op) src[1][i] (op) ... (op) src[n-1][i]`, combined
  /// left to right (the bits `reduce` would give, applied n-1 times), in one
  /// pass over memory; `dst` equals one of the sources or overlaps none.
  /// Optional: strategies that read every peer's buffer at once
  /// (`ddl::one_shot`, `ddl::two_shot`) need it.
  void (*reduce_many)(void* ctx, std::byte* dst, const std::byte* const* src, int n, std::size_t count,
                      reduction r) = nullptr;
  /// What the op does once the reduction is complete (`avg` divides by `ranks`).
  void (*finalize)(void* ctx, std::byte* data, std::size_t count, reduction r, int ranks) = nullptr;
  /// Workspace of `bytes` in this memory (uninitialised), and its release.
  std::byte* (*allocate)(void* ctx, std::size_t bytes) = nullptr;
  void (*release)(void* ctx, std::byte* p, std::size_t bytes) = nullptr;
};

namespace detail {
/// Whether `[a, a + an)` and `[b, b + bn)` share a byte. `std::less` orders
/// pointers into different arrays too, where `<` leaves it unspecified.
inline bool overlaps(const std::byte* a, std::size_t an, const std::byte* b, std::size_t bn) noexcept {
  const std::less<const std::byte*> before;
  return an > 0 && bn > 0 && before(a, b + bn) && before(b, a + an);
}
}  // namespace detail

}  // namespace ddl
