#pragma once
/// \file
/// CUDA support: error checking, device buffer views, element-wise device
/// reductions (the kernels are in `cuda/kernels.hpp`) (ddl's vectorised kernel, or CCCL's `cub::DeviceTransform` where
/// `DDL_CUDA_CUB_ENGINE` is defined), and the `memory_ops` table for device
/// memory.
///
/// Compile translation units that include this with `nvcc` (the kernels are
/// defined here, header-only, like Thrust's); link `CUDA::cudart` (CMake:
/// `ddl::cuda`, which brings CCCL). Every operation is asynchronous on the buffer's stream:
/// nothing here synchronises or allocates per call, except workspace growth.
#if !defined(__CUDACC__)
#error "ddl/cuda: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#if defined(DDL_CUDA_CUB_ENGINE)
#include <cub/device/device_transform.cuh>
#include <cuda/std/tuple>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "ddl/core/buffer.hpp"
#include "ddl/core/error.hpp"
#include "ddl/core/memory.hpp"
#include "ddl/core/op.hpp"
#include "ddl/cuda/kernels.hpp"

/// Throws `ddl::transport_error` naming the call and CUDA's message.
#define DDL_CUDA_CHECK(call)                                                                              \
  do {                                                                                                    \
    const cudaError_t ddl_cuda_err_ = (call);                                                             \
    if (ddl_cuda_err_ != cudaSuccess)                                                                     \
      throw ::ddl::transport_error(std::string(#call) + " failed: " + cudaGetErrorName(ddl_cuda_err_) + \
                                   " (" + cudaGetErrorString(ddl_cuda_err_) + ")");                       \
  } while (0)

namespace ddl {

// CUDA's own 16-bit types map to ddl's (same size, same bits).
template <>
struct dtype_of<__half> : std::integral_constant<dtype, dtype::float16> {};
template <>
struct dtype_of<__nv_bfloat16> : std::integral_constant<dtype, dtype::bfloat16> {};

/// A view of device memory on `device`, ordered by `stream`.
/// Example: `comm.all_reduce(ddl::device_view(d_grads, n, 0, stream), ddl::op::sum);`
template <class T>
buffer_view device_view(T* data, std::size_t count, int device, cudaStream_t stream = nullptr) {
  return {data, count, dtype_of<T>::value, location{memory_space::cuda, device, stream}};
}
template <class T>
const_buffer_view device_view(const T* data, std::size_t count, int device, cudaStream_t stream = nullptr) {
  return {data, count, dtype_of<T>::value, location{memory_space::cuda, device, stream}};
}

namespace cuda {

/// Number of CUDA devices (0 when there is none or no driver).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

#if defined(DDL_CUDA_CUB_ENGINE)
/// What `cub::DeviceTransform` applies: the op in the dtype's compute type.
template <class T, class Op>
struct combine_fn {
  Op op;
  DDL_HOST_DEVICE T operator()(T a, T b) const { return T(op(compute_t<T>(a), compute_t<T>(b))); }
};
template <class T>
struct divide_fn {
  int ranks;
  DDL_HOST_DEVICE T operator()(T x) const { return T(compute_t<T>(x) / static_cast<compute_t<T>>(ranks)); }
};
#endif

/// Which code runs the element-wise device reductions (`reduce`, `finalize`):
/// - `kernel`: ddl's grid-stride kernel with 16-byte vector loads (above);
/// - `cub`: CCCL's `cub::DeviceTransform`, tuned per architecture by NVIDIA,
///   compiled in where `DDL_CUDA_CUB_ENGINE` is defined before this header
///   (`has_cub_engine`). It instantiates `DeviceTransform` for every dtype
///   and op, a large share of a CUDA translation unit's compile time, for
///   an engine that does not beat the kernel; ddl's tests and
///   `ddl-gpu-bench` define it to cross-check and time both.
/// Both give the same bits (each element is one `op` in the compute type).
/// `DDL_CUDA_REDUCE=kernel|cub` picks one for the process; `ddl-gpu-bench
/// reduce` times both beside a device-to-device copy.
enum class reduce_engine { kernel, cub };

#if defined(DDL_CUDA_CUB_ENGINE)
inline constexpr bool has_cub_engine = true;
#else
inline constexpr bool has_cub_engine = false;
#endif

inline const char* name_of(reduce_engine e) noexcept { return e == reduce_engine::cub ? "cub" : "kernel"; }

/// Throws unless `e` is compiled into this translation unit.
inline void require_engine(reduce_engine e, const char* who) {
  if (e == reduce_engine::cub && !has_cub_engine)
    throw invalid_argument(std::string(who) +
                           ": the cub engine is not compiled in; define DDL_CUDA_CUB_ENGINE before including "
                           "ddl/cuda.hpp (CMake: target_compile_definitions(<target> PRIVATE DDL_CUDA_CUB_ENGINE))");
}

/// The engine named by `DDL_CUDA_REDUCE` (read once), else `kernel`.
inline reduce_engine default_reduce_engine() {
  static const reduce_engine e = [] {
    const char* v = std::getenv("DDL_CUDA_REDUCE");
    if (!v || !*v || std::string(v) == "kernel") return reduce_engine::kernel;
    if (std::string(v) != "cub")
      throw invalid_argument(std::string("DDL_CUDA_REDUCE='") + v + "' must be kernel or cub");
    require_engine(reduce_engine::cub, "DDL_CUDA_REDUCE=cub");
    return reduce_engine::cub;
  }();
  return e;
}

/// Blocks for `n` elements: enough to fill the device, capped.
inline unsigned grid_for(std::size_t n, int width) {
  const std::size_t threads = (n + static_cast<std::size_t>(width) - 1) / static_cast<std::size_t>(width);
  const std::size_t blocks = (threads + 255) / 256;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

/// `dst[i] = a[i] (op) b[i]` on `stream`; `dst` equals `a` or `b`, or overlaps
/// neither. Pointers may be on a peer device when peer access is enabled.
inline void reduce(void* dst, const void* a, const void* b, std::size_t count, reduction r, cudaStream_t stream,
                   reduce_engine engine = default_reduce_engine()) {
  require_engine(engine, "cuda::reduce");
  if (count == 0) return;
  visit_dtype(r.type, [&](auto tag) {
    using T = decltype(tag);
    visit_op(r.oper, [&](auto f) {
      auto* d = static_cast<T*>(dst);
      const auto* x = static_cast<const T*>(a);
      const auto* y = static_cast<const T*>(b);
#if defined(DDL_CUDA_CUB_ENGINE)
      if (engine == reduce_engine::cub) {
        DDL_CUDA_CHECK(cub::DeviceTransform::Transform(::cuda::std::make_tuple(x, y), d, count,
                                                      combine_fn<T, decltype(f)>{f}, stream));
        return;
      }
#endif
      kernels::combine<T><<<grid_for(count, kernels::vec<T>::width), 256, 0, stream>>>(d, x, y, count, f);
    });
  });
  DDL_CUDA_CHECK(cudaGetLastError());
}

/// `dst[i] = src[0][i] (op) ... (op) src[n-1][i]` on `stream`, left to right
/// (the host `reduce_many`'s bits), in one kernel reading all n sources at
/// once (`kernels::many_max` at most; more is an error). `dst` equals one of
/// the sources or overlaps none. Sources may lie on peer devices with peer
/// access enabled: the direct strategies (`one_shot`, `two_shot`) read their
/// peers' buffers through it.
inline void reduce_many(void* dst, const void* const* src, int n, std::size_t count, reduction r,
                        cudaStream_t stream) {
  if (count == 0 || n < 1) return;
  if (n > kernels::many_max)
    throw invalid_argument("cuda::reduce_many: " + std::to_string(n) + " sources; one kernel reads at most " +
                           std::to_string(kernels::many_max) + " (use ring or multi_ring for more ranks)");
  if (n == 1) {
    if (dst != src[0]) DDL_CUDA_CHECK(cudaMemcpyAsync(dst, src[0], count * size_of(r.type), cudaMemcpyDefault, stream));
    return;
  }
  kernels::sources s{};
  std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(dst);
  for (int k = 0; k < n; ++k) {
    s.p[k] = src[k];
    bits |= reinterpret_cast<std::uintptr_t>(src[k]);
  }
  const bool aligned = bits % 16 == 0;
  visit_dtype(r.type, [&](auto tag) {
    using T = decltype(tag);
    visit_op(r.oper, [&](auto f) {
      kernels::combine_many<T><<<grid_for(count, kernels::vec<T>::width), 256, 0, stream>>>(static_cast<T*>(dst), s, n,
                                                                                            count, aligned, f);
    });
  });
  DDL_CUDA_CHECK(cudaGetLastError());
}

/// The op's final touch on the device (`avg` divides by `ranks`).
inline void finalize(void* data, std::size_t count, reduction r, int ranks, cudaStream_t stream,
                     reduce_engine engine = default_reduce_engine()) {
  require_engine(engine, "cuda::finalize");
  if (r.oper != op::avg || count == 0 || ranks == 1) return;
  visit_dtype(r.type, [&](auto tag) {
    using T = decltype(tag);
    auto* d = static_cast<T*>(data);
#if defined(DDL_CUDA_CUB_ENGINE)
    if (engine == reduce_engine::cub) {
      DDL_CUDA_CHECK(cub::DeviceTransform::Transform(d, d, count, divide_fn<T>{ranks}, stream));
      return;
    }
#endif
    kernels::divide<T><<<grid_for(count, 1), 256, 0, stream>>>(d, count, ranks);
  });
  DDL_CUDA_CHECK(cudaGetLastError());
}

/// Makes `device` current for the calling thread for the scope.
class device_guard {
 public:
  explicit device_guard(int device) {
    DDL_CUDA_CHECK(cudaGetDevice(&previous_));
    if (device >= 0 && device != previous_) DDL_CUDA_CHECK(cudaSetDevice(device));
  }
  ~device_guard() { (void)cudaSetDevice(previous_); }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = 0;
};

/// Where a table's operations run: a device and a stream.
struct stream_context {
  int device = 0;
  cudaStream_t stream = nullptr;
};

/// The `memory_ops` table for device memory on `ctx` (which must outlive
/// the table's use). Copies are `cudaMemcpyAsync`, reductions the kernels
/// above, workspace `cudaMalloc`; all asynchronous on `ctx->stream`.
inline memory_ops device_memory_ops(stream_context* ctx) {
  memory_ops m;
  m.name = "cuda";
  m.ctx = ctx;
  m.copy = [](void* c, std::byte* dst, const std::byte* src, std::size_t n) {
    auto* s = static_cast<stream_context*>(c);
    if (n && dst != src) DDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s->stream));
  };
  m.reduce = [](void* c, std::byte* dst, const std::byte* a, const std::byte* b, std::size_t count, reduction r) {
    reduce(dst, a, b, count, r, static_cast<stream_context*>(c)->stream);
  };
  m.reduce_many = [](void* c, std::byte* dst, const std::byte* const* src, int n, std::size_t count, reduction r) {
    reduce_many(dst, reinterpret_cast<const void* const*>(src), n, count, r, static_cast<stream_context*>(c)->stream);
  };
  m.finalize = [](void* c, std::byte* p, std::size_t count, reduction r, int ranks) {
    finalize(p, count, r, ranks, static_cast<stream_context*>(c)->stream);
  };
  m.allocate = [](void* c, std::size_t n) {
    device_guard g(static_cast<stream_context*>(c)->device);
    void* p = nullptr;
    DDL_CUDA_CHECK(cudaMalloc(&p, n));
    return static_cast<std::byte*>(p);
  };
  m.release = [](void* c, std::byte* p, std::size_t) {
    device_guard g(static_cast<stream_context*>(c)->device);
    (void)cudaFree(p);
  };
  return m;
}

}  // namespace cuda
}  // namespace ddl
