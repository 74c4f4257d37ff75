#pragma once
/// \file
/// Bulk conversions between the 16-bit floating-point types and `float` for
/// the host kernels: `widen` (exact) and `narrow` (round to nearest, ties to
/// even), element for element the same bits as `float(x)` and `half(f)` /
/// `bfloat16(f)`, NaNs included. On x86 (GCC or Clang) through 8-wide
/// instructions chosen at run time, so no `-march` flag is needed: F16C for
/// `half`, AVX2 for `bfloat16`; elsewhere, or with `portable`, through the
/// element-wise code of core/float16.hpp. And the fused kernels the host's
/// 16-bit reductions run where the CPU has AVX2 and F16C: 8 elements
/// widened, combined and rounded in registers (`combine_fused`,
/// `combine_many_fused`), the same bits as widening, combining and narrowing
/// through memory; `bfloat16` 16 at a time where the CPU also rounds floats
/// to it (AVX-512 BF16). `DDL_NO_X86_AVX512` leaves the 16-wide kernels out
/// (tests of the 8-wide ones on CPUs that have both).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ddl/core/float16.hpp"
#include "ddl/core/op.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDA_ARCH__) && !defined(DDL_NO_X86_DISPATCH)
#define DDL_HAVE_X86_DISPATCH 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define DDL_HAVE_X86_DISPATCH 0
#endif
#if DDL_HAVE_X86_DISPATCH && !defined(DDL_NO_X86_AVX512)
#define DDL_HAVE_X86_BF16_NATIVE 1
#else
#define DDL_HAVE_X86_BF16_NATIVE 0
#endif

namespace ddl {
namespace host {
namespace detail {

#if DDL_HAVE_X86_DISPATCH
__attribute__((target("avx,f16c"))) inline void widen_x86(const half* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = _cvtsh_ss(s[i].bits);
}

__attribute__((target("avx,f16c"))) inline void narrow_x86(const float* s, half* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // (One at a time through the 4-wide form: Clang's `_cvtss_sh` is a macro
  // with a compound literal, which -Wpedantic rejects in C++.)
  for (; i < n; ++i)
    d[i].bits = static_cast<std::uint16_t>(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(s[i]), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), 0));
}

__attribute__((target("avx2"))) inline void widen_x86(const bfloat16* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(x, 16));
  }
  for (; i < n; ++i) d[i] = ddl::detail::bf16_bits_to_float(s[i].bits);
}

// float_to_bf16_bits, 8 at a time: add 0x7fff plus the kept part's lowest
// bit and drop the low half; a NaN keeps its top bits and is made quiet. The
// bits in the low half of each 32-bit lane.
__attribute__((target("avx2"))) inline __m256i bf16_bits8(__m256i x) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40),
                abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i high = _mm256_srli_epi32(x, 16);
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_and_si256(high, one)), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
}
// Packs 8 lanes of 16-bit values to 16 bits; packus works per 128-bit lane,
// so the permute puts lane 1's four after lane 0's.
__attribute__((target("avx2"))) inline __m128i pack_low16(__m256i r) {
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8));
}

__attribute__((target("avx2"))) inline void narrow_x86(const float* s, bfloat16* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), pack_low16(bf16_bits8(x)));
  }
  for (; i < n; ++i) d[i].bits = ddl::detail::float_to_bf16_bits(s[i]);
}

// --- Fused: 8 elements loaded and widened, combined, rounded, in registers ---
// load8 / store8 convert as widen_x86 / narrow_x86; round8 rounds 8 floats to
// T and back (reduce_many's rounding after every source).
__attribute__((target("avx,f16c"))) inline __m256 load8(const half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__attribute__((target("avx,f16c"))) inline void store8(half* p, __m256 x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("avx,f16c"))) inline __m256 round8(half, __m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("avx2"))) inline __m256 load8(const bfloat16* p) {
  const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}
__attribute__((target("avx2"))) inline void store8(bfloat16* p, __m256 x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack_low16(bf16_bits8(_mm256_castps_si256(x))));
}
__attribute__((target("avx2"))) inline __m256 round8(bfloat16, __m256 x) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits8(_mm256_castps_si256(x)), 16));
}
// The functors of core/op.hpp on 8 floats, their results bit for bit: MINPS
// and MAXPS return the second operand where the comparison fails (NaNs
// included), as `b < a ? b : a` and `a < b ? b : a` do.
__attribute__((target("avx"))) inline __m256 op8(ops::sum, __m256 a, __m256 b) { return _mm256_add_ps(a, b); }
__attribute__((target("avx"))) inline __m256 op8(ops::prod, __m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
__attribute__((target("avx"))) inline __m256 op8(ops::min, __m256 a, __m256 b) { return _mm256_min_ps(b, a); }
__attribute__((target("avx"))) inline __m256 op8(ops::max, __m256 a, __m256 b) { return _mm256_max_ps(b, a); }

// The elements [i, n) of the fused kernels below, 8 at a time from `i`;
// returns where they stopped.
template <class T, class F>
__attribute__((target("avx2,f16c"))) std::size_t combine_x86(T* dst, const T* a, const T* b, std::size_t n, F f,
                                                              std::size_t i = 0) {
  for (; i + 8 <= n; i += 8) store8(dst + i, op8(f, load8(a + i), load8(b + i)));
  return i;
}

template <class T, class F>
__attribute__((target("avx2,f16c"))) std::size_t combine_many_x86(T* dst, const T* const* src, int n,
                                                                   std::size_t count, F f, std::size_t i = 0) {
  for (; i + 8 <= count; i += 8) {
    __m256 acc = op8(f, load8(src[0] + i), load8(src[1] + i));
    for (int k = 2; k < n; ++k) acc = op8(f, round8(T{}, acc), load8(src[k] + i));
    store8(dst + i, acc);
  }
  return i;
}
#endif

#if DDL_HAVE_X86_BF16_NATIVE
// --- bfloat16, 16 at a time, rounded by the CPU (AVX-512 BF16) ---
// VCVTNEPS2BF16 rounds to nearest even and quiets NaNs as float_to_bf16_bits
// does, but reads subnormal floats as zero; 16 floats holding one (VFPCLASSPS
// class 0x20) are rounded by bf16_bits8 instead, 8 at a time. The same bits
// as the 8-wide kernels, then (test_core, every value, on CPUs that have it).
// Intrinsics with an undefined merge source are taken in their zero-masked
// form under an all-ones mask (the same instructions): GCC 12 warns of their
// `undefined` source otherwise (-Wmaybe-uninitialized).
#define DDL_X86_BF16_TARGET "avx2,f16c,avx512f,avx512dq,avx512bf16"
constexpr __mmask16 all16 = 0xffff;
__attribute__((target(DDL_X86_BF16_TARGET))) inline __m512 load16(const bfloat16* p) {
  const __m512i x = _mm512_maskz_cvtepu16_epi32(all16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all16, x, 16));
}
__attribute__((target(DDL_X86_BF16_TARGET))) inline __m256i bf16_bits16(__m512 x) {
  if (_mm512_fpclass_ps_mask(x, 0x20) != 0) {
    const __m256i lo = _mm512_maskz_extracti64x4_epi64(0xf, _mm512_castps_si512(x), 0);
    const __m256i hi = _mm512_maskz_extracti64x4_epi64(0xf, _mm512_castps_si512(x), 1);
    return _mm256_set_m128i(pack_low16(bf16_bits8(hi)), pack_low16(bf16_bits8(lo)));
  }
  const __m256bh r = _mm512_cvtneps_pbh(x);
  __m256i bits;
  std::memcpy(&bits, &r, sizeof bits);
  return bits;
}
__attribute__((target(DDL_X86_BF16_TARGET))) inline void store16(bfloat16* p, __m512 x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits16(x));
}
__attribute__((target(DDL_X86_BF16_TARGET))) inline __m512 round16(__m512 x) {
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(all16, bf16_bits16(x));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all16, wide, 16));
}
// op8's operand order, 16 wide.
__attribute__((target("avx512f"))) inline __m512 op16(ops::sum, __m512 a, __m512 b) { return _mm512_add_ps(a, b); }
__attribute__((target("avx512f"))) inline __m512 op16(ops::prod, __m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
__attribute__((target("avx512f"))) inline __m512 op16(ops::min, __m512 a, __m512 b) {
  return _mm512_maskz_min_ps(all16, b, a);
}
__attribute__((target("avx512f"))) inline __m512 op16(ops::max, __m512 a, __m512 b) {
  return _mm512_maskz_max_ps(all16, b, a);
}

template <class F>
__attribute__((target(DDL_X86_BF16_TARGET))) std::size_t combine16_x86(bfloat16* dst, const bfloat16* a,
                                                                       const bfloat16* b, std::size_t n, F f) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) store16(dst + i, op16(f, load16(a + i), load16(b + i)));
  return i;
}

template <class F>
__attribute__((target(DDL_X86_BF16_TARGET))) std::size_t combine_many16_x86(bfloat16* dst,
                                                                            const bfloat16* const* src, int n,
                                                                            std::size_t count, F f) {
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512 acc = op16(f, load16(src[0] + i), load16(src[1] + i));
    for (int k = 2; k < n; ++k) acc = op16(f, round16(acc), load16(src[k] + i));
    store16(dst + i, acc);
  }
  return i;
}
#undef DDL_X86_BF16_TARGET
#endif

#if DDL_HAVE_X86_DISPATCH
/// The x86 features the kernels dispatch on, as the CPU and the operating
/// system offer them (CPUID, and XGETBV for the register state the OS
/// saves). Read from CPUID rather than `__builtin_cpu_supports`, whose
/// feature names differ between compilers (Clang 14 refuses "f16c").
struct x86_features {
  bool avx = false, f16c = false, avx2 = false, avx512f = false, avx512dq = false, avx512bf16 = false;
  static const x86_features& here() {
    static const x86_features f = read();
    return f;
  }

 private:
  static x86_features read() {
    x86_features f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1;
    if (!osxsave) return f;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const bool ymm = (lo & 0x6) == 0x6;            // SSE and AVX state
    const bool zmm = ymm && (lo & 0xe0) == 0xe0;   // opmask and ZMM state
    f.avx = ymm && ((c >> 28) & 1);
    f.f16c = f.avx && ((c >> 29) & 1);
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx2 = f.avx && ((b >> 5) & 1);
      f.avx512f = zmm && ((b >> 16) & 1);
      f.avx512dq = f.avx512f && ((b >> 17) & 1);
      const unsigned leaves = a;  // highest subleaf of leaf 7
      if (leaves >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = f.avx512f && ((a >> 5) & 1);
    }
    return f;
  }
};
#endif

/// Whether `widen` and `narrow` of T use the 8-wide instructions here.
template <class T>
bool have_x86_conversions() noexcept {
#if DDL_HAVE_X86_DISPATCH
  if constexpr (std::is_same_v<T, half>) return x86_features::here().f16c;
  else return x86_features::here().avx2;
#else
  return false;
#endif
}

/// `d[i] = float(s[i])`; `portable` forces the element-wise code (tests).
template <class T>
void widen(const T* s, float* d, std::size_t n, bool portable = false) {
#if DDL_HAVE_X86_DISPATCH
  if (!portable && have_x86_conversions<T>()) return widen_x86(s, d, n);
#endif
  (void)portable;
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
}

/// `d[i] = T(s[i])`; `portable` as for `widen`.
template <class T>
void narrow(const float* s, T* d, std::size_t n, bool portable = false) {
#if DDL_HAVE_X86_DISPATCH
  if (!portable && have_x86_conversions<T>()) return narrow_x86(s, d, n);
#endif
  (void)portable;
  for (std::size_t i = 0; i < n; ++i) d[i] = T(s[i]);
}

/// Whether the fused kernels run here (AVX2 and F16C).
inline bool have_x86_fused() noexcept {
#if DDL_HAVE_X86_DISPATCH
  return x86_features::here().avx2 && x86_features::here().f16c;
#else
  return false;
#endif
}

/// Whether `bfloat16`'s fused kernels run 16 wide here, rounding with the
/// CPU's own instruction (AVX-512 F, DQ and BF16, besides AVX2 and F16C).
inline bool have_x86_bf16_native() noexcept {
#if DDL_HAVE_X86_BF16_NATIVE
  const x86_features& f = x86_features::here();
  return have_x86_fused() && f.avx512f && f.avx512dq && f.avx512bf16;
#else
  return false;
#endif
}

/// `dst[i] = T(f(float(a[i]), float(b[i])))` for a prefix of the `n`
/// elements, 8 at a time; returns its length (0 where the fused kernels do
/// not run). `dst` may be `a` or `b`.
template <class T, class F>
std::size_t combine_fused(T* dst, const T* a, const T* b, std::size_t n, F f) {
#if DDL_HAVE_X86_DISPATCH
  std::size_t i = 0;
#if DDL_HAVE_X86_BF16_NATIVE
  if constexpr (std::is_same_v<T, bfloat16>)
    if (have_x86_bf16_native()) i = combine16_x86(dst, a, b, n, f);
#endif
  if (have_x86_fused()) return combine_x86(dst, a, b, n, f, i);
#endif
  (void)dst, (void)a, (void)b, (void)n, (void)f;
  return 0;
}

/// `reduce_many`'s left-to-right combination of `n` >= 2 sources, rounded to
/// T after every source, for a prefix of `count` elements; returns its length
/// (0 where the fused kernels do not run). `dst` may be one of the sources.
template <class T, class F>
std::size_t combine_many_fused(T* dst, const T* const* src, int n, std::size_t count, F f) {
#if DDL_HAVE_X86_DISPATCH
  std::size_t i = 0;
#if DDL_HAVE_X86_BF16_NATIVE
  if constexpr (std::is_same_v<T, bfloat16>)
    if (have_x86_bf16_native()) i = combine_many16_x86(dst, src, n, count, f);
#endif
  if (have_x86_fused()) return combine_many_x86(dst, src, n, count, f, i);
#endif
  (void)dst, (void)src, (void)n, (void)count, (void)f;
  return 0;
}

}  // namespace detail
}  // namespace host
}  // namespace ddl
