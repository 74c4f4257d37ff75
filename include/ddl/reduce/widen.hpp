#pragma once
/// \file
/// Bulk conversions between the 16-bit floating-point types and `float` for
/// the host kernels: `widen` (exact) and `narrow` (round to nearest, ties to
/// even), element for element the same bits as `float(x)` and `half(f)` /
/// `bfloat16(f)`, NaNs included. On x86 (GCC or Clang) through 8-wide
/// instructions chosen at run time, so no `-march` flag is needed: F16C for
/// `half`, AVX2 for `bfloat16`; elsewhere, or with `portable`, through the
/// element-wise code of core/float16.hpp.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ddl/core/float16.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDA_ARCH__) && !defined(DDL_NO_X86_DISPATCH)
#define DDL_HAVE_X86_DISPATCH 1
#include <immintrin.h>
#else
#define DDL_HAVE_X86_DISPATCH 0
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
  for (; i < n; ++i) d[i].bits = _cvtss_sh(s[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

__attribute__((target("avx2"))) inline void widen_x86(const bfloat16* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(x, 16));
  }
  for (; i < n; ++i) d[i] = ddl::detail::bf16_bits_to_float(s[i].bits);
}

__attribute__((target("avx2"))) inline void narrow_x86(const float* s, bfloat16* d, std::size_t n) {
  // float_to_bf16_bits, 8 at a time: add 0x7fff plus the kept part's lowest
  // bit and drop the low half; a NaN keeps its top bits and is made quiet.
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40),
                abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i high = _mm256_srli_epi32(x, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_and_si256(high, one)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    // Pack the 32-bit results (all below 2^16) to 16 bits; packus works per
    // 128-bit lane, so the permute puts lane 1's four after lane 0's.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) d[i].bits = ddl::detail::float_to_bf16_bits(s[i]);
}
#endif

/// Whether `widen` and `narrow` of T use the 8-wide instructions here.
template <class T>
bool have_x86_conversions() noexcept {
#if DDL_HAVE_X86_DISPATCH
  if constexpr (std::is_same_v<T, half>) {
    static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    return yes;
  } else {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
  }
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

}  // namespace detail
}  // namespace host
}  // namespace ddl
