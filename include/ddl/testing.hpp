#pragma once
/// \file
/// Verifiable data for checking a collective, as ddl's own tests and
/// benchmarks check theirs: integer-valued, index-dependent inputs whose
/// reduction is exact in every dtype and op (no rounding, no overflow for up
/// to 32 ranks), so a result is compared bit for bit with `expected_value`,
/// computed independently of any reduction code. Host and device code
/// (`DDL_HOST_DEVICE`): a CUDA kernel or a Thrust functor can fill and check
/// device buffers with it. Opt in: `<ddl.hpp>` does not include it.
///
/// Example (checking a strategy of your own, 5 ranks, float sum):
/// \code
///   for (std::size_t i = 0; i < n; ++i)
///     x[i] = ddl::testing::to_element<float>(ddl::testing::input_value(ddl::dtype::float32, ddl::op::sum, rank, i));
///   comm.all_reduce(ddl::host_view(x), ddl::op::sum);
///   for (std::size_t i = 0; i < n; ++i)
///     assert(ddl::testing::same_bits(x[i], ddl::testing::expected_value<float>(ddl::op::sum, 5, i)));
/// \endcode
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ddl/core/dtype.hpp"
#include "ddl/core/float16.hpp"
#include "ddl/core/macros.hpp"
#include "ddl/core/op.hpp"

namespace ddl::testing {

/// splitmix64's finaliser.
DDL_HOST_DEVICE inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A 64-bit hash of (rank, index, salt).
DDL_HOST_DEVICE inline std::uint64_t hash(int rank, std::size_t index, std::uint64_t salt = 0) {
  return mix(mix(static_cast<std::uint64_t>(rank) * 0x100000001b3ull + salt) ^ index);
}

/// Largest |value| per rank such that a sum over 32 ranks stays an exactly
/// representable integer at every partial step (bf16: 8 mantissa bits -> 256;
/// half: 11 bits -> 2048; the rest have room to spare).
DDL_HOST_DEVICE inline std::int64_t magnitude(ddl::dtype t) {
  switch (t) {
    case ddl::dtype::bfloat16: return 8;
    case ddl::dtype::float16: return 63;
    default: return 100000;
  }
}

/// Input of `rank` at element `index` for op `o`, as an exact integer.
/// prod: +-1 mostly, +-2 only on ranks divisible by 4 (|product| <= 2^8 for
/// 32 ranks), so products stay exact and never overflow int32.
DDL_HOST_DEVICE inline std::int64_t input_value(ddl::dtype t, ddl::op o, int rank, std::size_t index) {
  const std::uint64_t h = hash(rank, index, static_cast<std::uint64_t>(o) + 1);
  if (o == ddl::op::prod) {
    const std::int64_t mag = (rank % 4 == 0 && (h & 1)) ? 2 : 1;
    return (h >> 1) & 1 ? -mag : mag;
  }
  const std::int64_t m = magnitude(t);
  return static_cast<std::int64_t>(h % static_cast<std::uint64_t>(2 * m + 1)) - m;
}

/// `v` as an element of type T (exact for the values `input_value` gives).
template <class T>
DDL_HOST_DEVICE T to_element(std::int64_t v) {
  if constexpr (std::is_same_v<T, ddl::half> || std::is_same_v<T, ddl::bfloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// Exact reduction of the inputs of `ranks` ranks at `index`, in T (avg
/// divided once at the end, as the op defines it).
template <class T>
DDL_HOST_DEVICE T expected_value(ddl::op o, int ranks, std::size_t index) {
  const ddl::dtype t = ddl::dtype_of_v<T>;
  std::int64_t acc = input_value(t, o, 0, index);
  for (int r = 1; r < ranks; ++r) {
    const std::int64_t v = input_value(t, o, r, index);
    switch (o) {
      case ddl::op::sum:
      case ddl::op::avg: acc += v; break;
      case ddl::op::prod: acc *= v; break;
      case ddl::op::min: acc = v < acc ? v : acc; break;
      case ddl::op::max: acc = v > acc ? v : acc; break;
    }
  }
  T e = to_element<T>(acc);
  if (o == ddl::op::avg) {
    using C = ddl::compute_t<T>;
    e = T(C(e) / C(ranks));
  }
  return e;
}

/// Bit-for-bit equality (so a NaN or -0 is not hidden by `==`). Elements of
/// 1, 2, 4 or 8 bytes compare as integers: a `memcmp` call per element is
/// what a sanitizer build keeps (and intercepts).
template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
    using U = std::conditional_t<
        sizeof(T) == 8, std::uint64_t,
        std::conditional_t<sizeof(T) == 4, std::uint32_t, std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>>>;
    U x, y;
    std::memcpy(&x, &a, sizeof(T));
    std::memcpy(&y, &b, sizeof(T));
    return x == y;
  } else {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  }
}

/// Sentinel byte for outputs: 0xA5A5... is no integer in any dtype and far
/// from every expected value, so an element never written shows up.
constexpr unsigned char sentinel = 0xA5;

}  // namespace ddl::testing
