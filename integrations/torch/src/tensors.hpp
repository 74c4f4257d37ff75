#pragma once
// Torch's tensors as ddl sees them, whatever transport runs the group:
// torch's dtypes and ops as ddl's, tensors as ddl's buffer views (dtypes ddl
// does not reduce move as their bytes in int32 words), and the checks that
// name what ddl does not take.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <vector>

#include <ddl.hpp>

namespace ddl_torch {



inline ddl::dtype dtype_of(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kFloat: return ddl::dtype::float32;
    case at::kDouble: return ddl::dtype::float64;
    case at::kHalf: return ddl::dtype::float16;
    case at::kBFloat16: return ddl::dtype::bfloat16;
    case at::kInt: return ddl::dtype::int32;
    case at::kLong: return ddl::dtype::int64;
    default:
      TORCH_CHECK(false, "ddl backend: ", call, " on a tensor of dtype ", t.scalar_type(),
                  " is not supported (reductions take float32, float64, float16, bfloat16, int32, int64; "
                  "broadcast, the gathers, scatter and all_to_all take any dtype)");
  }
}

inline ddl::op op_of(const c10d::ReduceOp& o, const char* call) {
  switch (o.op_) {
    case c10d::ReduceOp::SUM: return ddl::op::sum;
    case c10d::ReduceOp::AVG: return ddl::op::avg;
    case c10d::ReduceOp::PRODUCT: return ddl::op::prod;
    case c10d::ReduceOp::MIN: return ddl::op::min;
    case c10d::ReduceOp::MAX: return ddl::op::max;
    default:
      TORCH_CHECK(false, "ddl backend: ", call, " with reduce op ", static_cast<int>(o.op_),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

inline void check_dense(const at::Tensor& t, const char* call) {
  TORCH_CHECK(t.device().is_cpu(), "ddl backend: ", call, " needs CPU tensors, got one on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "ddl backend: ", call, " needs dense tensors");
  TORCH_CHECK(t.is_contiguous(), "ddl backend: ", call, " needs contiguous tensors");
}

inline ddl::buffer_view view_of(const at::Tensor& t, const char* call) {
  check_dense(t, call);
  return ddl::buffer_view{t.data_ptr(), static_cast<std::size_t>(t.numel()), dtype_of(t, call), ddl::location{}};
}

// Calls that only move data (broadcast, the gathers, scatter, all_to_all) take tensors
// of any dtype: one ddl does not reduce (uint8, int8, bool, int16, complex:
// what all_gather_object and broadcast_object_list send) moves as its bytes,
// in int32 words through scratch buffers, each part padded to whole words.
inline bool native(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong: return true;
    default: return false;
  }
}
inline at::Tensor bytes_of(const at::Tensor& t) { return t.reshape({-1}).view(at::kByte); }
// Bytes [0, bytes) of part `i` of `parts` equal parts laid out in `words`.
inline at::Tensor part_bytes(const at::Tensor& words, int64_t parts, int64_t i, int64_t bytes) {
  const at::Tensor b = words.view(at::kByte);
  return b.narrow(0, i * (b.numel() / parts), bytes);
}

inline const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* call) {
  TORCH_CHECK(ts.size() == 1, "ddl backend: ", call, " takes one tensor per call, got ", ts.size());
  return ts[0];
}

}  // namespace ddl_torch
