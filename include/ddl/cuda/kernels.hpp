#pragma once
/// \file
/// ddl's CUDA kernels (`ddl::cuda::kernels`): the vectorised element-wise
/// reduction of two or many sources, and the flagged one_shot and two_shot
/// all-reduces, whose kernels meet through counters in the ranks' flag
/// regions. Launched by `cuda/runtime.hpp` and the CUDA transports.
#if !defined(__CUDACC__)
#error "ddl/cuda/kernels.hpp: compile this translation unit with nvcc (CMake: set its LANGUAGE to CUDA)"
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ddl/core/buffer.hpp"
#include "ddl/core/op.hpp"

namespace ddl::cuda {

namespace kernels {

// Elements per thread per iteration: 16 bytes per load where aligned.
template <class T>
struct vec {
  static constexpr int width = sizeof(T) >= 16 ? 1 : 16 / static_cast<int>(sizeof(T));
};

template <class T, class Op>
__global__ void combine(T* __restrict__ dst, const T* a, const T* b, std::size_t n, Op op) {
  // a or b may equal dst (in place): no __restrict__ on them.
  using C = compute_t<T>;
  constexpr int W = vec<T>::width;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t nv = n / W;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool aligned = ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(a) |
                         reinterpret_cast<std::uintptr_t>(b)) % 16) == 0;
  std::size_t tail = 0;
  if (aligned && W > 1) {
    for (std::size_t v = tid; v < nv; v += stride) {
      alignas(16) T x[W];
      alignas(16) T y[W];
      *reinterpret_cast<uint4*>(x) = reinterpret_cast<const uint4*>(a)[v];
      *reinterpret_cast<uint4*>(y) = reinterpret_cast<const uint4*>(b)[v];
#pragma unroll
      for (int k = 0; k < W; ++k) x[k] = T(op(C(x[k]), C(y[k])));
      reinterpret_cast<uint4*>(dst)[v] = *reinterpret_cast<const uint4*>(x);
    }
    tail = nv * W;
  }
  for (std::size_t i = tail + tid; i < n; i += stride) dst[i] = T(op(C(a[i]), C(b[i])));
}

/// Up to this many sources per `combine_many` launch (passed by value).
inline constexpr int many_max = 32;
struct sources {
  const void* p[many_max];
};

// dst[i] = src[0][i] op src[1][i] op ... op src[n-1][i], left to right with a
// rounding to T after each op (the host's `reduce_many` bits). Each thread
// reads every source of its elements before it writes them, so `dst` may be
// one of the sources. `aligned`: every pointer is 16-byte aligned.
template <class T, class Op>
__global__ void combine_many(T* dst, sources s, int n, std::size_t count, bool aligned, Op op) {
  using C = compute_t<T>;
  constexpr int W = vec<T>::width;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::size_t tail = 0;
  if (aligned && W > 1) {
    const std::size_t nv = count / W;
    for (std::size_t v = tid; v < nv; v += stride) {
      alignas(16) T acc[W];
      alignas(16) T x[W];
      *reinterpret_cast<uint4*>(acc) = static_cast<const uint4*>(s.p[0])[v];
      for (int k = 1; k < n; ++k) {
        *reinterpret_cast<uint4*>(x) = static_cast<const uint4*>(s.p[k])[v];
#pragma unroll
        for (int j = 0; j < W; ++j) acc[j] = T(op(C(acc[j]), C(x[j])));
      }
      reinterpret_cast<uint4*>(dst)[v] = *reinterpret_cast<const uint4*>(acc);
    }
    tail = nv * W;
  }
  for (std::size_t i = tail + tid; i < count; i += stride) {
    T a = static_cast<const T*>(s.p[0])[i];
    for (int k = 1; k < n; ++k) a = T(op(C(a), C(static_cast<const T*>(s.p[k])[i])));
    dst[i] = a;
  }
}

/// The ranks' flag regions for `flagged_all_reduce` (one per rank, on its device).
struct flag_regions {
  std::byte* base[many_max];
};
/// A flag region: a counter (in a 4 KiB header), then the two slots.
inline constexpr std::size_t flag_header = 4096;
inline constexpr std::size_t flag_slot = std::size_t{64} << 10;
inline constexpr std::size_t flag_region_bytes = flag_header + 2 * flag_slot;

/// `*p` loaded through L2 only (`__ldcg`), for data another multiprocessor wrote.
template <class T>
__device__ inline T load_cg(const T* p) {
  using U = std::conditional_t<sizeof(T) == 1, unsigned char,
                               std::conditional_t<sizeof(T) == 2, unsigned short,
                                                  std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>>>;
  static_assert(sizeof(T) == sizeof(U), "load_cg: 1, 2, 4 or 8 bytes");
  const U u = __ldcg(reinterpret_cast<const U*>(p));
  T t;
  memcpy(&t, &u, sizeof t);
  return t;
}

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Waits until `*c` reaches `target` (0), `*aborted` (3) or past `until` (1).
__device__ inline int wait_counter(const volatile unsigned long long* c, unsigned long long target,
                                   unsigned long long until, const volatile int* aborted) {
  unsigned polls = 0;
  while (*c < target) {
    if ((++polls & 255u) == 0) {
      if (*aborted) return 3;
      if (global_ns() > until) return 1;
    }
  }
  return 0;
}

// The first failure of a call (a peer that never came, an abort) into the
// rank's mapped host words: `err` = [code, peer].
__device__ inline void report_failure(volatile unsigned long long* err, int code, int peer) {
  if (err[0] != 0) return;
  err[1] = static_cast<unsigned long long>(peer);
  __threadfence_system();
  err[0] = static_cast<unsigned long long>(code);
}

/// `flagged_all_reduce`'s blocks: this many threads, and a block for each
/// this many bytes of the call, at most `one_shot_max_blocks` (the same on
/// every rank: the calls' sizes agree).
inline constexpr unsigned one_shot_threads = 256;
inline constexpr std::size_t one_shot_bytes_per_block = 4096;
inline constexpr unsigned one_shot_max_blocks = 16;

// A whole one-shot all-reduce of up to `flag_slot` bytes, with no host
// synchronisation: rank r's k-th flagged call copies `in` into slot k % 2
// of its region, every block then adding one to the rank's counter; waits
// until every peer's counter reaches `target` (the blocks of all the ranks'
// one-shot calls so far, this one's counted: the same on every rank; at
// most `timeout_ns`, or until `*aborted`), and reduces the slots in rank
// order into `out` (avg divided by n). The ranks compared their calls
// before the launch (`cuda_peer_transport::flagged_all_reduce`). A slot is
// written again two calls later, after every peer raised its counter for
// call k + 1, so after each finished reading it (its call k kernel ran
// before its call k + 1 one). `err` (host memory, mapped): [code, peer];
// codes 1 timeout, 3 aborted. Then `out` is left alone.
template <class T, class Op>
__global__ void __launch_bounds__(one_shot_threads)
    flagged_all_reduce(T* out, const T* in, std::size_t count, flag_regions g, int n, int r, unsigned long long k,
                       unsigned long long target, unsigned long long timeout_ns, const volatile int* aborted,
                       volatile unsigned long long* err, bool avg, Op op) {
  using C = compute_t<T>;
  __shared__ int failed;
  const std::size_t s = k % 2;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  T* mine = reinterpret_cast<T*>(g.base[r] + flag_header + s * flag_slot);
  for (std::size_t i = tid; i < count; i += stride) mine[i] = in[i];
  if (threadIdx.x == 0) failed = 0;
  __threadfence_system();  // this thread's copy before the counter
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    atomicAdd(reinterpret_cast<unsigned long long*>(g.base[r]), 1ull);
  }
  if (threadIdx.x < static_cast<unsigned>(n) && static_cast<int>(threadIdx.x) != r) {
    const int p = static_cast<int>(threadIdx.x);
    const int code = wait_counter(reinterpret_cast<const volatile unsigned long long*>(g.base[p]), target,
                                  global_ns() + timeout_ns, aborted);
    __threadfence_system();
    if (code && atomicCAS(&failed, 0, 1) == 0) report_failure(err, code, p);
  }
  __syncthreads();
  if (failed) return;
  // Peers' slots are read through L2 (`ld.global.cg`), never from this
  // multiprocessor's L1, which is not coherent with their writes.
  auto slot = [&](int p) { return reinterpret_cast<const T*>(g.base[p] + flag_header + s * flag_slot); };
  for (std::size_t i = tid; i < count; i += stride) {
    T a = load_cg(slot(0) + i);
    for (int p = 1; p < n; ++p) a = T(op(C(a), C(load_cg(slot(p) + i))));
    if (avg) a = T(C(a) / static_cast<C>(n));
    out[i] = a;
  }
}

/// `flagged_two_shot`: its three counters per rank, at this offset of the
/// rank's flag region (after the one_shot counter), one per meeting: its
/// kernel has started (the rank's input is ready), its block of the result
/// is reduced, its reads of the peers are over. Each block of a call adds
/// one to each, so after a rank's k-th call each reads k times the blocks.
inline constexpr std::size_t two_shot_counters = 64;
/// `flagged_two_shot`'s blocks: this many threads, and at least this many
/// blocks fit on a multiprocessor (its launch bounds). The ranks' kernels
/// wait for each other, so all of them must be resident at once: the ranks
/// on one device share its multiprocessors times this
/// (`cuda_peer_fabric`'s `two_shot_blocks`).
inline constexpr unsigned two_shot_threads = 512;
inline constexpr unsigned two_shot_blocks_per_sm = 2;
/// Every rank's input and output of one `flagged_two_shot` call.
struct peer_buffers {
  const void* in[many_max];
  void* out[many_max];
};

// A whole two-shot all-reduce with no host synchronisation and no copy into
// the flag regions: the ranks' kernels read each other's buffers where they
// lie (`b`, exchanged by the host threads before the launch) and meet three
// times through counters in their flag regions (`two_shot_counters`): when
// started (so each rank's input is ready: its stream got to the kernel),
// rank r reduces block r (elements [r piece, (r + 1) piece) of `count`) of
// all n inputs in rank order into its output (avg divided by n), like
// `combine_many`; once every rank's block is reduced, it copies the n - 1
// other blocks from their owners' outputs; and block 0 returns only once
// every peer has finished reading, so no rank's stream goes on to change a
// buffer a peer still reads. In place is safe: until the second meeting
// only rank r reads block r of any buffer, and after it nobody reads an
// input. `k`: this rank's flagged two-shot calls so far, this one counted
// (the same on every rank). `aligned`: every pointer is 16-byte aligned and
// `piece` a multiple of 16 elements. Peers' memory is read through L2
// (`__ldcg`), never a stale L1 line. A failure leaves the output partly
// written and is reported through `err` (codes as `flagged_all_reduce`).
template <class T, class Op>
__global__ void __launch_bounds__(two_shot_threads, two_shot_blocks_per_sm)
    flagged_two_shot(peer_buffers b, std::size_t count, std::size_t piece, flag_regions g, int n, int r,
                     unsigned long long k, unsigned long long timeout_ns, const volatile int* aborted,
                     volatile unsigned long long* err, bool avg, bool aligned, Op op) {
  using C = compute_t<T>;
  constexpr int W = vec<T>::width;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  const unsigned long long target = k * gridDim.x;
  const unsigned long long until = global_ns() + timeout_ns;
  auto counter = [&](int p, int which) {
    return reinterpret_cast<unsigned long long*>(g.base[p] + two_shot_counters + 8 * static_cast<std::size_t>(which));
  };
  // Raises this rank's counter `which` for this block, then (`wait`) waits
  // until every peer's blocks have raised theirs. False on a failure.
  auto meet = [&](int which, bool wait) {
    __threadfence_system();  // this thread's writes before the counter
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      atomicAdd(counter(r, which), 1ull);
    }
    if (wait && threadIdx.x < static_cast<unsigned>(n) && static_cast<int>(threadIdx.x) != r) {
      const int p = static_cast<int>(threadIdx.x);
      const int code = wait_counter(counter(p, which), target, until, aborted);
      __threadfence_system();
      if (code && atomicCAS(&failed, 0, 1) == 0) report_failure(err, code, p);
    }
    __syncthreads();
    return failed == 0;
  };
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto block_of = [&](int p, std::size_t& lo, std::size_t& hi) {
    lo = static_cast<std::size_t>(p) * piece;
    lo = lo < count ? lo : count;
    hi = lo + piece < count ? lo + piece : count;
  };
  if (!meet(0, true)) return;
  std::size_t lo, hi;
  block_of(r, lo, hi);
  T* mine = static_cast<T*>(b.out[r]);
  std::size_t start = lo;
  if (aligned && W > 1) {
    // U vectors per thread at a time, each source's U loads issued together:
    // more bytes in flight than one at a time.
    constexpr int U = 2;
    const std::size_t nv = (hi - lo) / W, base = lo / W;
    for (std::size_t v0 = tid; v0 < nv; v0 += U * stride) {
      alignas(16) T acc[U][W];
      alignas(16) T x[U][W];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::size_t v = v0 + u * stride;
        if (v < nv) *reinterpret_cast<uint4*>(acc[u]) = __ldcg(static_cast<const uint4*>(b.in[0]) + base + v);
      }
#pragma unroll 4
      for (int p = 1; p < n; ++p) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const std::size_t v = v0 + u * stride;
          if (v < nv) *reinterpret_cast<uint4*>(x[u]) = __ldcg(static_cast<const uint4*>(b.in[p]) + base + v);
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < W; ++j) acc[u][j] = T(op(C(acc[u][j]), C(x[u][j])));
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::size_t v = v0 + u * stride;
        if (v >= nv) continue;
        if (avg)
#pragma unroll
          for (int j = 0; j < W; ++j) acc[u][j] = T(C(acc[u][j]) / static_cast<C>(n));
        reinterpret_cast<uint4*>(mine)[base + v] = *reinterpret_cast<const uint4*>(acc[u]);
      }
    }
    start = lo + nv * W;
  }
  for (std::size_t i = start + tid; i < hi; i += stride) {
    T a = load_cg(static_cast<const T*>(b.in[0]) + i);
    for (int p = 1; p < n; ++p) a = T(op(C(a), C(load_cg(static_cast<const T*>(b.in[p]) + i))));
    if (avg) a = T(C(a) / static_cast<C>(n));
    mine[i] = a;
  }
  if (!meet(1, true)) return;
  for (int j = 1; j < n; ++j) {
    const int p = (r + j) % n;
    block_of(p, lo, hi);
    const T* theirs = static_cast<const T*>(b.out[p]);
    start = lo;
    if (aligned && W > 1) {
      constexpr int U = 4;  // vectors per thread at a time, loaded together
      const std::size_t nv = (hi - lo) / W, base = lo / W;
      const uint4* from = reinterpret_cast<const uint4*>(theirs) + base;
      uint4* to = reinterpret_cast<uint4*>(mine) + base;
      for (std::size_t v0 = tid; v0 < nv; v0 += U * stride) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (v0 + u * stride < nv) x[u] = __ldcg(from + v0 + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (v0 + u * stride < nv) to[v0 + u * stride] = x[u];
      }
      start = lo + nv * W;
    }
    for (std::size_t i = start + tid; i < hi; i += stride) mine[i] = load_cg(theirs + i);
  }
  meet(2, blockIdx.x == 0);
}

template <class T>
__global__ void divide(T* data, std::size_t n, int ranks) {
  using C = compute_t<T>;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    data[i] = T(C(data[i]) / static_cast<C>(ranks));
}

}  // namespace kernels

}  // namespace ddl::cuda
