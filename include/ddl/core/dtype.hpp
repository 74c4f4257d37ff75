#pragma once
/// \file
/// Element types a collective can carry, as a run-time tag (`ddl::dtype`)
/// and as C++ types, with a dispatcher from the one to the other.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ddl/core/error.hpp"
#include "ddl/core/float16.hpp"

namespace ddl {

/// Element type of a buffer.
enum class dtype : std::uint8_t { int32, int64, float32, float64, float16, bfloat16 };

/// Every dtype, in declaration order (handy for tests and benchmarks).
inline constexpr dtype all_dtypes[] = {dtype::int32,   dtype::int64,   dtype::float32,
                                       dtype::float64, dtype::float16, dtype::bfloat16};

/// The dtype tag of a C++ element type; a compile error for any other type.
template <class T>
struct dtype_of {
  static_assert(sizeof(T) == 0,
                "ddl: unsupported element type (use std::int32_t, std::int64_t, float, double, "
                "ddl::half or ddl::bfloat16)");
};
template <> struct dtype_of<std::int32_t> : std::integral_constant<dtype, dtype::int32> {};
template <> struct dtype_of<std::int64_t> : std::integral_constant<dtype, dtype::int64> {};
template <> struct dtype_of<float> : std::integral_constant<dtype, dtype::float32> {};
template <> struct dtype_of<double> : std::integral_constant<dtype, dtype::float64> {};
template <> struct dtype_of<half> : std::integral_constant<dtype, dtype::float16> {};
template <> struct dtype_of<bfloat16> : std::integral_constant<dtype, dtype::bfloat16> {};
/// The `dtype` of element type `T` (cv-qualifiers aside).
template <class T>
inline constexpr dtype dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

/// True for the C++ element types ddl carries.
template <class T, class = void>
struct is_element : std::false_type {};
template <class T>
struct is_element<T, std::void_t<decltype(dtype_of<T>::value)>> : std::true_type {};

/// Bytes per element.
constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::int32: return 4;
    case dtype::int64: return 8;
    case dtype::float32: return 4;
    case dtype::float64: return 8;
    case dtype::float16: return 2;
    case dtype::bfloat16: return 2;
  }
  return 0;
}

/// Short name, as nccl-tests prints it (`int32`, `float`, `half`, `bfloat16`, ...).
constexpr const char* name_of(dtype t) noexcept {
  switch (t) {
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::float32: return "float";
    case dtype::float64: return "double";
    case dtype::float16: return "half";
    case dtype::bfloat16: return "bfloat16";
  }
  return "?";
}

/// Parses a dtype name (the names of `name_of`, plus `float32`, `float64`,
/// `fp16`, `bf16`). Throws `invalid_argument` naming the bad string.
inline dtype parse_dtype(const std::string& s) {
  if (s == "int32" || s == "int") return dtype::int32;
  if (s == "int64") return dtype::int64;
  if (s == "float" || s == "float32") return dtype::float32;
  if (s == "double" || s == "float64") return dtype::float64;
  if (s == "half" || s == "float16" || s == "fp16") return dtype::float16;
  if (s == "bfloat16" || s == "bf16") return dtype::bfloat16;
  throw invalid_argument("unknown dtype '" + s +
                         "' (expected int32, int64, float, double, half or bfloat16)");
}

/// Calls `f(T{})` with the C++ type of `t` (a value-initialised tag object).
/// Example: `ddl::visit_dtype(t, [&](auto tag) { using T = decltype(tag); ... });`
template <class F>
decltype(auto) visit_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::int32: return f(std::int32_t{});
    case dtype::int64: return f(std::int64_t{});
    case dtype::float32: return f(float{});
    case dtype::float64: return f(double{});
    case dtype::float16: return f(half{});
    case dtype::bfloat16: return f(bfloat16{});
  }
  throw invalid_argument("corrupt dtype value " + std::to_string(static_cast<int>(t)));
}

/// Type in which one element is combined: 16-bit floats compute in float.
template <class T> struct compute_type { using type = T; /**< `T` itself */ };
/// `half` computes in float.
template <> struct compute_type<half> { using type = float; /**< float */ };
/// `bfloat16` computes in float.
template <> struct compute_type<bfloat16> { using type = float; /**< float */ };
/// `compute_type<T>::type`.
template <class T>
using compute_t = typename compute_type<T>::type;

}  // namespace ddl
