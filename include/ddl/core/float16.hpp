#pragma once
/// \file
/// 16-bit floating-point storage types: IEEE binary16 (`ddl::half`) and
/// bfloat16 (`ddl::bfloat16`). Host arithmetic converts to `float`, operates,
/// and rounds back to nearest-even, so a reduction step is one rounding: the
/// same on every rank and every run.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ddl/core/macros.hpp"

namespace ddl {
namespace detail {

DDL_HOST_DEVICE inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
DDL_HOST_DEVICE inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// float -> binary16, round to nearest, ties to even; overflow to infinity; a
/// NaN keeps the top 10 bits of its payload and comes out quiet, as x86's
/// F16C converts it (so the host's bulk conversions, reduce/widen.hpp, give
/// the same bits with or without it). On the GPU the hardware's conversion
/// (the same rounding; NaNs may differ in payload).
DDL_HOST_DEVICE inline std::uint16_t float_to_half_bits(float f) {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0u));
  if (absx >= 0x477ff000u)  // rounds to >= 65520: overflow
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Value in units of 2^-24 is absx_float * 2^24; do it in the integer domain.
    const std::uint32_t exp = absx >> 23;
    if (exp < 102) return static_cast<std::uint16_t>(sign);  // < 2^-25: rounds to 0
    const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exp;  // so that result = mant >> shift units of 2^-24
    std::uint32_t r = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped bits.
  std::uint32_t r = ((absx - 0x38000000u) >> 13);
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into exponent: correct
  return static_cast<std::uint16_t>(sign | r);
#endif
}

/// binary16 -> float, exact; a NaN comes out quiet with its payload (as F16C).
DDL_HOST_DEVICE inline float half_bits_to_float(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
  return f;
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: value = mant * 2^-24, exact in float.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400u) == 0);
  return bits_float(sign | ((112u - static_cast<std::uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13));
#endif
}

/// float -> bfloat16, round to nearest, ties to even; NaN kept quiet.
DDL_HOST_DEVICE inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

DDL_HOST_DEVICE inline float bf16_bits_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

/// IEEE 754 binary16 storage type (same layout as CUDA's `__half`).
struct half {
  std::uint16_t bits;  // uninitialised by default, like float: trivially copyable and constructible
  half() = default;
  DDL_HOST_DEVICE explicit half(float f) : bits(detail::float_to_half_bits(f)) {}
  DDL_HOST_DEVICE explicit operator float() const { return detail::half_bits_to_float(bits); }
  DDL_HOST_DEVICE static half from_bits(std::uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
  friend bool operator==(half a, half b) { return a.bits == b.bits; }
  friend bool operator!=(half a, half b) { return a.bits != b.bits; }
};

/// bfloat16 storage type (same layout as CUDA's `__nv_bfloat16`).
struct bfloat16 {
  std::uint16_t bits;  // uninitialised by default, like float: trivially copyable and constructible
  bfloat16() = default;
  DDL_HOST_DEVICE explicit bfloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}
  DDL_HOST_DEVICE explicit operator float() const { return detail::bf16_bits_to_float(bits); }
  DDL_HOST_DEVICE static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  friend bool operator==(bfloat16 a, bfloat16 b) { return a.bits == b.bits; }
  friend bool operator!=(bfloat16 a, bfloat16 b) { return a.bits != b.bits; }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2, "ddl: 16-bit types must be 2 bytes");
static_assert(std::is_trivial_v<half> && std::is_trivial_v<bfloat16>, "ddl: 16-bit types must be trivial");

}  // namespace ddl
