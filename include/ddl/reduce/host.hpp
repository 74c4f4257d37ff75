#pragma once
/// \file
/// Host (CPU) reduction kernels. Each element is combined once per step in a
/// fixed order, so results are deterministic; loops are written so the
/// compiler vectorises them (no aliasing between distinct operands).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ddl/core/dtype.hpp"
#include "ddl/core/macros.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/core/op.hpp"
#include "ddl/reduce/widen.hpp"

namespace ddl {
namespace host {
namespace detail {

template <class T, class F>
void combine_into(T* DDL_RESTRICT acc, const T* DDL_RESTRICT b, std::size_t n, F f) {
  using C = compute_t<T>;
  for (std::size_t i = 0; i < n; ++i) acc[i] = T(f(C(acc[i]), C(b[i])));
}

template <class T, class F>
void combine_into_right(const T* DDL_RESTRICT a, T* DDL_RESTRICT acc, std::size_t n, F f) {
  using C = compute_t<T>;
  for (std::size_t i = 0; i < n; ++i) acc[i] = T(f(C(a[i]), C(acc[i])));
}

template <class T, class F>
void combine(T* DDL_RESTRICT dst, const T* DDL_RESTRICT a, const T* DDL_RESTRICT b, std::size_t n,
             F f) {
  using C = compute_t<T>;
  for (std::size_t i = 0; i < n; ++i) dst[i] = T(f(C(a[i]), C(b[i])));
}

/// 16-bit floats are combined in float: 8 at a time in registers where the
/// CPU has AVX2 and F16C (reduce/widen.hpp's fused kernels), else, and for
/// the last few elements, in blocks of this many elements widened, combined
/// and narrowed through memory (one rounding per step, the bits of
/// `T(f(C(a), C(b)))` element by element either way). Each block of every
/// operand is read before the block of `dst` is written, so `dst` may be an
/// operand.
inline constexpr std::size_t wide_block = 512;

template <class T>
inline constexpr bool widened_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <class T, class F>
void combine_wide(T* dst, const T* a, const T* b, std::size_t n, F f) {
  float wa[wide_block], wb[wide_block];
  for (std::size_t i = combine_fused(dst, a, b, n, f); i < n; i += wide_block) {
    const std::size_t m = std::min(wide_block, n - i);
    widen(a + i, wa, m);
    widen(b + i, wb, m);
    for (std::size_t j = 0; j < m; ++j) wa[j] = f(wa[j], wb[j]);
    narrow(wa, dst + i, m);
  }
}

// reduce_many's order for 16-bit floats: rounded to T after every source.
template <class T, class F>
void combine_many_wide(T* dst, const T* const* src, int n, std::size_t count, F f) {
  float acc[wide_block], w[wide_block];
  T rounded[wide_block];
  for (std::size_t i = combine_many_fused(dst, src, n, count, f); i < count; i += wide_block) {
    const std::size_t m = std::min(wide_block, count - i);
    widen(src[0] + i, acc, m);
    for (int k = 1; k < n; ++k) {
      if (k > 1) {
        narrow(acc, rounded, m);
        widen(rounded, acc, m);
      }
      widen(src[k] + i, w, m);
      for (std::size_t j = 0; j < m; ++j) acc[j] = f(acc[j], w[j]);
    }
    narrow(acc, dst + i, m);
  }
}

/// `reduce_many` works in runs of this many bytes: each run of every source
/// is combined in registers (a local array) and stored once, so `dst` may be
/// any of the sources and every source is read exactly once.
inline constexpr std::size_t many_run_bytes = 128;

template <class T, class F>
void combine_many(T* dst, const T* const* src, int n, std::size_t count, F f) {
  using C = compute_t<T>;
  constexpr std::size_t run = many_run_bytes / sizeof(T) ? many_run_bytes / sizeof(T) : 1;
  std::size_t i = 0;
  for (; i + run <= count; i += run) {
    T acc[run];
    const T* DDL_RESTRICT s0 = src[0] + i;
    const T* DDL_RESTRICT s1 = src[1] + i;
    for (std::size_t j = 0; j < run; ++j) acc[j] = T(f(C(s0[j]), C(s1[j])));
    for (int k = 2; k < n; ++k) {
      const T* DDL_RESTRICT sk = src[k] + i;
      for (std::size_t j = 0; j < run; ++j) acc[j] = T(f(C(acc[j]), C(sk[j])));
    }
    for (std::size_t j = 0; j < run; ++j) dst[i + j] = acc[j];
  }
  for (; i < count; ++i) {
    T a = T(f(C(src[0][i]), C(src[1][i])));
    for (int k = 2; k < n; ++k) a = T(f(C(a), C(src[k][i])));
    dst[i] = a;
  }
}

}  // namespace detail

/// `dst[i] = a[i] (op) b[i]` for `count` elements of `r.type`.
/// \pre `dst` equals `a` or `b`, or overlaps neither.
inline void reduce(void* dst, const void* a, const void* b, std::size_t count, reduction r) {
  if (count == 0) return;
  visit_dtype(r.type, [&](auto tag) {
    using T = decltype(tag);
    visit_op(r.oper, [&](auto f) {
      auto* d = static_cast<T*>(dst);
      const auto* pa = static_cast<const T*>(a);
      const auto* pb = static_cast<const T*>(b);
      if constexpr (detail::widened_v<T>)
        detail::combine_wide(d, pa, pb, count, f);
      else if (d == pa)
        detail::combine_into(d, pb, count, f);
      else if (d == pb)
        detail::combine_into_right(pa, d, count, f);
      else
        detail::combine(d, pa, pb, count, f);
    });
  });
}

/// `bytes` from `src` to `dst` (the ranges may overlap), as `memmove`, but
/// a copy between ranges that do not overlap, whose destination lies 1-63
/// bytes past its source modulo 4 KiB, goes in pieces of `copy_piece`
/// bytes: past ~4 KiB glibc 2.36 copies with `rep movsb`, which AMD Zen
/// CPUs run at a small fraction of the memory's rate at those distances
/// (from a page-aligned stage into a buffer 16 bytes into its page, as
/// `malloc` returns large blocks). Elsewhere, pieces cost as much as one
/// call.
inline constexpr std::size_t copy_piece = 2048;
/// Whether `bytes` at addresses `da` and `sa` share no byte: distances both
/// ways as unsigned addresses (no comparison of pointers into unrelated
/// objects), both at least `bytes`.
inline bool ranges_apart(std::uintptr_t da, std::uintptr_t sa, std::size_t bytes) noexcept {
  return da - sa >= bytes && sa - da >= bytes;
}
inline void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const auto da = reinterpret_cast<std::uintptr_t>(d), sa = reinterpret_cast<std::uintptr_t>(s);
  const std::uintptr_t ahead = da - sa;
  if (bytes <= copy_piece || !ranges_apart(da, sa, bytes) || (ahead & 4095u) - 1u >= 63u) {
    std::memmove(d, s, bytes);
    return;
  }
  for (std::size_t at = 0; at < bytes; at += copy_piece) std::memcpy(d + at, s + at, std::min(copy_piece, bytes - at));
}

/// `dst[i] = src[0][i] (op) ... (op) src[n-1][i]`, left to right (the same
/// bits as n-1 calls of `reduce`), blocked so every source is read once.
/// \pre `dst` equals one of the sources or overlaps none.
inline void reduce_many(void* dst, const void* const* src, int n, std::size_t count, reduction r) {
  if (count == 0 || n < 1) return;
  if (n == 1) {
    copy(dst, src[0], count * size_of(r.type));
    return;
  }
  visit_dtype(r.type, [&](auto tag) {
    using T = decltype(tag);
    visit_op(r.oper, [&](auto f) {
      auto* d = static_cast<T*>(dst);
      const auto* const* s = reinterpret_cast<const T* const*>(src);
      if constexpr (detail::widened_v<T>)
        detail::combine_many_wide(d, s, n, count, f);
      else
        detail::combine_many(d, s, n, count, f);
    });
  });
}

/// Applies what an op does once the reduction is complete: `avg` divides by
/// `ranks` (truncating for integers); other ops leave the data alone.
inline void finalize(void* data, std::size_t count, reduction r, int ranks) {
  if (r.oper != op::avg || count == 0 || ranks == 1) return;
  visit_dtype(r.type, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    auto* d = static_cast<T*>(data);
    const C n = static_cast<C>(ranks);
    if constexpr (detail::widened_v<T>) {
      float w[detail::wide_block];
      for (std::size_t i = 0; i < count; i += detail::wide_block) {
        const std::size_t m = std::min(detail::wide_block, count - i);
        detail::widen(d + i, w, m);
        for (std::size_t j = 0; j < m; ++j) w[j] /= n;
        detail::narrow(w, d + i, m);
      }
    } else {
      for (std::size_t i = 0; i < count; ++i) d[i] = T(C(d[i]) / n);
    }
  });
}

/// `bytes` from `src` to `dst` (ranges apart) with streaming stores on
/// x86-64 (SSE2 `movntdq`; elsewhere, and below `stream_from` bytes,
/// `copy`): the written lines go to memory without being read in first, and
/// stay in no core's cache. For a stage a peer on another core reads next:
/// a cached write must first take each line back from the peer's cache, which
/// where the two cores lie far apart (a VM's vCPUs placed so by the host),
/// ran at a fraction of the rate.
/// Ends with a store fence, so a release that follows publishes it.
inline constexpr std::size_t stream_from = 4096;
inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const auto da = reinterpret_cast<std::uintptr_t>(d), sa = reinterpret_cast<std::uintptr_t>(s);
  if (bytes < stream_from || !ranges_apart(da, sa, bytes)) {  // small, or overlapping
    copy(dst, src, bytes);
    return;
  }
  const std::size_t head = (16 - (da & 15u)) & 15u;  // to the first 16-byte boundary of `dst`
  std::memcpy(d, s, head);
  std::size_t at = head;
  for (; at + 64 <= bytes; at += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + at + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + at + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + at + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + at), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + at + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + at + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + at + 48), e);
  }
  _mm_sfence();
  std::memcpy(d + at, s + at, bytes - at);
#else
  copy(dst, src, bytes);
#endif
}

}  // namespace host

/// The table for host memory: `host::copy`, the host kernels, `new[]`.
inline memory_ops host_memory_ops() noexcept {
  memory_ops m;
  m.name = "host";
  m.copy = [](void*, std::byte* dst, const std::byte* src, std::size_t n) { host::copy(dst, src, n); };
  m.stream_copy = [](void*, std::byte* dst, const std::byte* src, std::size_t n) { host::stream_copy(dst, src, n); };
  m.reduce = [](void*, std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, reduction r) {
    host::reduce(dst, a, b, count, r);
  };
  m.reduce_many = [](void*, std::byte* dst, const std::byte* const* src, int n, std::size_t count, reduction r) {
    host::reduce_many(dst, reinterpret_cast<const void* const*>(src), n, count, r);
  };
  m.finalize = [](void*, std::byte* p, std::size_t count, reduction r, int ranks) {
    host::finalize(p, count, r, ranks);
  };
  m.allocate = [](void*, std::size_t n) { return new std::byte[n]; };
  m.release = [](void*, std::byte* p, std::size_t) { delete[] p; };
  return m;
}

}  // namespace ddl
