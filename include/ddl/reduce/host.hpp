#pragma once
/// \file
/// Host (CPU) reduction kernels. Each element is combined once per step in a
/// fixed order, so results are deterministic; loops are written so the
/// compiler vectorises them (no aliasing between distinct operands).
#include <cstddef>

#include "../core/dtype.hpp"
#include "../core/macros.hpp"
#include "../core/op.hpp"

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
      if (d == pa)
        detail::combine_into(d, pb, count, f);
      else if (d == pb)
        detail::combine_into_right(pa, d, count, f);
      else
        detail::combine(d, pa, pb, count, f);
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
    for (std::size_t i = 0; i < count; ++i) d[i] = T(C(d[i]) / n);
  });
}

}  // namespace host
}  // namespace ddl
