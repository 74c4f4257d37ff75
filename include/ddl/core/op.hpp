#pragma once
/// \file
/// Reduction operators. The functors are `DDL_HOST_DEVICE` so host and
/// device reductions share one definition.
#include <cstdint>
#include <string>

#include "ddl/core/dtype.hpp"
#include "ddl/core/macros.hpp"

namespace ddl {

/// Reduction operator. `avg` sums, then divides by the number of ranks once,
/// on the rank that owns the slice, so every rank receives the same bits
/// (integer types divide with truncation toward zero).
enum class op : std::uint8_t { sum, prod, min, max, avg };

/// Every op, in declaration order.
inline constexpr op all_ops[] = {op::sum, op::prod, op::min, op::max, op::avg};

/// "sum", "prod", "min", "max" or "avg".
constexpr const char* name_of(op o) noexcept {
  switch (o) {
    case op::sum: return "sum";
    case op::prod: return "prod";
    case op::min: return "min";
    case op::max: return "max";
    case op::avg: return "avg";
  }
  return "?";
}

/// Parses an op name; throws `invalid_argument` naming the bad string.
inline op parse_op(const std::string& s) {
  for (op o : all_ops)
    if (s == name_of(o)) return o;
  throw invalid_argument("unknown op '" + s + "' (expected sum, prod, min, max or avg)");
}

/// The combining functors (`visit_op`): two values in the compute type.
/// min/max use `<` only, so the result for NaN inputs is deterministic (the
/// first operand wins ties).
namespace ops {
/// `a + b`.
struct sum { template <class C> DDL_HOST_DEVICE C operator()(C a, C b) const { return a + b; } };
/// `a * b`.
struct prod { template <class C> DDL_HOST_DEVICE C operator()(C a, C b) const { return a * b; } };
/// The smaller; `a` on ties.
struct min { template <class C> DDL_HOST_DEVICE C operator()(C a, C b) const { return b < a ? b : a; } };
/// The larger; `a` on ties.
struct max { template <class C> DDL_HOST_DEVICE C operator()(C a, C b) const { return a < b ? b : a; } };
}  // namespace ops

/// Calls `f(functor)` with the combining functor of `o` (`avg` combines as `sum`).
template <class F>
decltype(auto) visit_op(op o, F&& f) {
  switch (o) {
    case op::sum:
    case op::avg: return f(ops::sum{});
    case op::prod: return f(ops::prod{});
    case op::min: return f(ops::min{});
    case op::max: return f(ops::max{});
  }
  throw invalid_argument("corrupt op value " + std::to_string(static_cast<int>(o)));
}

/// What a reduction combines: element type and operator. `received_first`
/// puts the received operand on the left (`received (op) local`): algorithms
/// that combine pairwise (recursive doubling) always put the lower rank's
/// value first, so both partners compute the same bits even for ops that
/// are not bitwise commutative (min/max on -0/+0 or NaN).
struct reduction {
  ddl::dtype type;              ///< the elements' type
  ddl::op oper;                 ///< the operator
  bool received_first = false;  ///< the received operand on the left
};

}  // namespace ddl
